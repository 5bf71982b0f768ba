//! The Newton system of the barrier solver ([`super::barrier`]): a block
//! diagonal matrix, one block per application, each the identity plus a few
//! rank-one terms, coupled across blocks by one rank-one term per unit:
//!
//! `M = blockdiag(I + Σ_r ρ_ir v_ir v_irᵀ) + Σ_u a_u a_uᵀ / c_u`.
//!
//! Each block is factored on its own (order ≤ the number of units) and the
//! unit terms are brought back with the Woodbury identity,
//! `M⁻¹ = B⁻¹ − B⁻¹U (C + UᵀB⁻¹U)⁻¹ UᵀB⁻¹`, so a solve costs
//! `O(apps · units³ + units³)` instead of `O((apps · units)³)`. Dense
//! Cholesky on matrices of order ≤ 16 is a dozen lines; no crate in the
//! workspace offers it without pulling in a general linear-algebra
//! library, so it is written here.

/// Where each block's entries are and which unit row each entry has.
#[derive(Clone, Debug)]
pub(super) struct Shape {
    /// Start of each block's entries, then the end of the last.
    pub starts: Vec<usize>,
    /// The unit (coupling row) of each entry; a block has at most one
    /// entry per unit.
    pub row_of: Vec<usize>,
    /// How many unit rows there are.
    pub rows: usize,
}

/// A rank-one term of every block: block `b` gets
/// `weight[b] · v vᵀ` with `v` the block's entries of `vector`.
pub(super) struct RankOne<'a> {
    pub weight: &'a [f64],
    pub vector: &'a [f64],
}

/// The unit terms: entry `k` of `a_u` is `vector[k]` where
/// `row_of[k] == u`, and `c_u = inverse_weight[u]` (> 0).
pub(super) struct Coupling<'a> {
    pub vector: &'a [f64],
    pub inverse_weight: &'a [f64],
}

/// `M`, factored.
pub(super) struct Factored<'a> {
    shape: &'a Shape,
    terms: &'a [RankOne<'a>; 2],
    coupling: &'a [f64],
    coupling_inverse_weight: &'a [f64],
    /// Each block's terms in orthonormal form: the scalars per block, the
    /// vectors `q₀`, `q₁` per entry.
    pairings: Vec<Pairing>,
    q0: Vec<f64>,
    q1: Vec<f64>,
    /// Cholesky factor of `C + UᵀB⁻¹U`, row-major lower triangle.
    schur: Vec<f64>,
}

/// Cholesky factorisation in place (`a = L Lᵀ`, `L` in the lower
/// triangle of `a`, order `n`, row-major). `None` if `a` is not
/// numerically positive definite. With `guarded`, a pivot lost to
/// rounding (below [`PIVOT_FLOOR`] of the largest diagonal entry) is
/// raised to that floor: the factor is then of a slightly regularised
/// matrix, which the solves' iterative refinement corrects for.
fn cholesky(a: &mut [f64], n: usize, guarded: bool) -> Option<()> {
    let scale = (0..n).map(|j| a[j * n + j].abs()).fold(0.0, f64::max);
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= a[j * n + k] * a[j * n + k];
        }
        if guarded && d <= PIVOT_FLOOR * scale {
            d = PIVOT_FLOOR * scale;
        }
        if !(d > 0.0 && d.is_finite()) {
            return None;
        }
        let d = d.sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = s / d;
        }
    }
    Some(())
}

/// See [`cholesky`].
const PIVOT_FLOOR: f64 = 1e-14;

/// Solves `L Lᵀ x = b` in place, `l` from [`cholesky`].
fn cholesky_solve(l: &[f64], n: usize, b: &mut [f64]) {
    for i in 0..n {
        let mut s = b[i];
        for k in 0..i {
            s -= l[i * n + k] * b[k];
        }
        b[i] = s / l[i * n + i];
    }
    for i in (0..n).rev() {
        let mut s = b[i];
        for k in i + 1..n {
            s -= l[k * n + i] * b[k];
        }
        b[i] = s / l[i * n + i];
    }
}

/// One block's two terms in orthonormal form: `v₀ = r₀₀ q₀`,
/// `v₁ = r₀₁ q₀ + r₁₁ q₁` (Gram-Schmidt; `q₁ = 0` where `v₁ ∥ v₀`), with
/// `D = det(I + G)`, `G = R W Rᵀ`, computed as a sum of non-negative
/// terms. Everything the solves need follows without a difference of
/// large numbers, whatever the weights (they reach 1e20 near the optimum,
/// and the two vectors are often nearly parallel). The vectors `q₀`, `q₁`
/// are written to the caller's slices.
struct Pairing {
    r00: f64,
    r01: f64,
    w0: f64,
    w1: f64,
    det: f64,
    /// `(I + G)⁻¹` as `(a, b, c)` for `[a, b; b, c]`.
    inner: (f64, f64, f64),
}

impl Pairing {
    fn new(
        v: (&[f64], &[f64]),
        w0: f64,
        w1: f64,
        q0: &mut [f64],
        q1: &mut [f64],
    ) -> Option<Pairing> {
        let (v0, v1) = v;
        let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let r00 = norm(v0);
        for (q, x) in q0.iter_mut().zip(v0) {
            *q = if r00 > 0.0 { x / r00 } else { 0.0 };
        }
        q1.copy_from_slice(v1);
        let mut r01 = 0.0;
        // Twice, so that q₁ is orthogonal to working precision.
        for _ in 0..2 {
            let dot: f64 = q1.iter().zip(q0.iter()).map(|(a, b)| a * b).sum();
            r01 += dot;
            q1.iter_mut()
                .zip(q0.iter())
                .for_each(|(a, b)| *a -= dot * b);
        }
        let mut r11 = norm(q1);
        if r11 > PARALLEL * norm(v1) && r11 > 0.0 {
            q1.iter_mut().for_each(|x| *x /= r11);
        } else {
            r11 = 0.0;
            q1.iter_mut().for_each(|x| *x = 0.0);
        }
        let det = 1.0
            + w0 * r00 * r00
            + w1 * (r01 * r01 + r11 * r11)
            + w0 * w1 * (r00 * r11) * (r00 * r11);
        if !(det.is_finite() && w0 >= 0.0 && w1 >= 0.0) {
            return None;
        }
        let g00 = w0 * r00 * r00 + w1 * r01 * r01;
        let g01 = w1 * r01 * r11;
        let g11 = w1 * r11 * r11;
        Some(Pairing {
            r00,
            r01,
            w0,
            w1,
            det,
            inner: ((1.0 + g11) / det, -g01 / det, (1.0 + g00) / det),
        })
    }

    /// `(K⁻¹)₁₀` and `(K⁻¹)₁₁` for `K = W⁻¹ + VᵀV`: what the border on
    /// term 1 needs.
    fn capacitance_row1(&self) -> (f64, f64) {
        let k10 = -self.w0 * self.w1 * self.r00 * self.r01 / self.det;
        let k11 = self.w1 * (1.0 + self.w0 * self.r00 * self.r00) / self.det;
        (k10, k11)
    }
}

/// Steps of iterative refinement of each solve.
const REFINEMENTS: usize = 2;

/// Below this (relative) the second term's vector counts as parallel to
/// the first.
const PARALLEL: f64 = 1e-13;

/// Factors `M` (see the module's documentation) for two terms per block;
/// `None` if the Schur complement of the unit terms is not numerically
/// positive definite. A block adds `diag(â²) + Y ((I + G)⁻¹ − I) Yᵀ`,
/// `Y = diag(â) Q`, to the Schur complement `C + UᵀB⁻¹U`.
pub(super) fn factor<'a>(
    shape: &'a Shape,
    terms: &'a [RankOne<'a>; 2],
    coupling: &Coupling<'a>,
) -> Option<Factored<'a>> {
    let blocks = shape.starts.len() - 1;
    let rows = shape.rows;
    let entries = shape.row_of.len();
    let mut pairings = Vec::with_capacity(blocks);
    let (mut q0, mut q1) = (vec![0.0; entries], vec![0.0; entries]);
    let mut schur = vec![0.0; rows * rows];
    for (u, c) in coupling.inverse_weight.iter().enumerate() {
        schur[u * rows + u] = *c;
    }
    for b in 0..blocks {
        let (lo, hi) = (shape.starts[b], shape.starts[b + 1]);
        let pairing = Pairing::new(
            (&terms[0].vector[lo..hi], &terms[1].vector[lo..hi]),
            terms[0].weight[b],
            terms[1].weight[b],
            &mut q0[lo..hi],
            &mut q1[lo..hi],
        )?;
        let (a, bb, c) = pairing.inner;
        let (m00, m01, m11) = (a - 1.0, bb, c - 1.0);
        for p in lo..hi {
            let u = shape.row_of[p];
            let ap = coupling.vector[p];
            let (y0p, y1p) = (ap * q0[p], ap * q1[p]);
            schur[u * rows + u] += ap * ap;
            let (s0, s1) = (m00 * y0p + m01 * y1p, m01 * y0p + m11 * y1p);
            for q in lo..hi {
                let v = shape.row_of[q];
                let aq = coupling.vector[q];
                schur[u * rows + v] += s0 * aq * q0[q] + s1 * aq * q1[q];
            }
        }
        pairings.push(pairing);
    }
    cholesky(&mut schur, rows, true)?;
    Some(Factored {
        shape,
        terms,
        coupling: coupling.vector,
        coupling_inverse_weight: coupling.inverse_weight,
        pairings,
        q0,
        q1,
        schur,
    })
}

/// `M` bordered ([`Factored::bordered`]): `e`, `M⁻¹e` and the border's
/// Schur complement.
pub(super) struct Bordered<'a> {
    m: &'a Factored<'a>,
    e: Vec<f64>,
    m_inv_e: Vec<f64>,
    schur: f64,
}

impl Bordered<'_> {
    /// `[x; x_t]` for the right-hand side `[rhs; rhs_t]`.
    pub(super) fn solve(&self, rhs: &[f64], rhs_t: f64) -> (Vec<f64>, f64) {
        let m_inv_rhs = self.m.solve(rhs);
        let x_t = (rhs_t
            - self
                .e
                .iter()
                .zip(&m_inv_rhs)
                .map(|(a, b)| a * b)
                .sum::<f64>())
            / self.schur;
        let x = m_inv_rhs
            .iter()
            .zip(&self.m_inv_e)
            .map(|(a, b)| a - b * x_t)
            .collect();
        (x, x_t)
    }
}

/// A bordered variable (the floor program's `t`): term 1's row of block
/// `b` is `(v_b, alpha[b])` over `(z_b, t)`, so the system gains the
/// column `e_b = w_b α_b v_b` and the corner `Σ_b w_b α_b²`.
pub(super) struct Border<'a> {
    pub alpha: &'a [f64],
}

impl Factored<'_> {
    /// `M⁻¹ rhs`, with [`REFINEMENTS`] steps of iterative refinement
    /// (the residual from `M` itself, in `O(entries)`): near the optimum
    /// the Woodbury solve loses digits to rounding, and a direction that
    /// is no descent direction would stop the barrier method.
    pub(super) fn solve(&self, rhs: &[f64]) -> Vec<f64> {
        let mut x = self.solve_once(rhs);
        for _ in 0..REFINEMENTS {
            let mx = self.multiply(&x);
            let residual: Vec<f64> = rhs.iter().zip(&mx).map(|(r, m)| r - m).collect();
            let fix = self.solve_once(&residual);
            x.iter_mut().zip(&fix).for_each(|(x, f)| *x += f);
        }
        x
    }

    /// `M x`.
    fn multiply(&self, x: &[f64]) -> Vec<f64> {
        let shape = self.shape;
        let mut out = x.to_vec();
        for b in 0..shape.starts.len() - 1 {
            let (lo, hi) = (shape.starts[b], shape.starts[b + 1]);
            for term in self.terms {
                let dot: f64 = (lo..hi).map(|k| term.vector[k] * x[k]).sum();
                let scaled = term.weight[b] * dot;
                for (o, v) in out[lo..hi].iter_mut().zip(&term.vector[lo..hi]) {
                    *o += v * scaled;
                }
            }
        }
        let mut by_row = vec![0.0; shape.rows];
        for (k, v) in x.iter().enumerate() {
            by_row[shape.row_of[k]] += self.coupling[k] * v;
        }
        for (u, d) in by_row.iter_mut().enumerate() {
            *d /= self.coupling_inverse_weight[u];
        }
        for (k, o) in out.iter_mut().enumerate() {
            *o += self.coupling[k] * by_row[shape.row_of[k]];
        }
        out
    }

    /// `M⁻¹ rhs` by the Woodbury identity, once.
    fn solve_once(&self, rhs: &[f64]) -> Vec<f64> {
        let shape = self.shape;
        let rows = shape.rows;
        let mut out = vec![0.0; rhs.len()];
        self.apply_blocks(rhs, &mut out);
        let mut w = vec![0.0; rows];
        for (k, p) in out.iter().enumerate() {
            w[shape.row_of[k]] += self.coupling[k] * p;
        }
        cholesky_solve(&self.schur, rows, &mut w);
        let spread: Vec<f64> = (0..rhs.len())
            .map(|k| self.coupling[k] * w[shape.row_of[k]])
            .collect();
        let mut back = vec![0.0; rhs.len()];
        self.apply_blocks(&spread, &mut back);
        out.iter_mut().zip(back).for_each(|(o, b)| *o -= b);
        out
    }

    /// Solves `[M e; eᵀ d] [x; x_t] = [rhs; rhs_t]` for `border`'s `e`
    /// and `d`. `None` if the border's Schur complement is not positive.
    pub(super) fn solve_bordered(
        &self,
        border: &Border<'_>,
        rhs: &[f64],
        rhs_t: f64,
    ) -> Option<(Vec<f64>, f64)> {
        Some(self.bordered(border)?.solve(rhs, rhs_t))
    }

    /// `M` bordered by `border`'s `e` and `d`, ready for any number of
    /// right-hand sides (the primal-dual iteration solves two per
    /// factorisation). Its Schur complement `d − eᵀM⁻¹e` is summed from
    /// `α_b² (K_b⁻¹)₁₁` and `hᵀ S⁻¹ h` (`h = UᵀB⁻¹e`), both
    /// non-negative: no difference of large numbers. `None` if it is not
    /// positive.
    pub(super) fn bordered(&self, border: &Border<'_>) -> Option<Bordered<'_>> {
        let shape = self.shape;
        let term = &self.terms[1];
        let other = &self.terms[0];
        let entries = shape.row_of.len();
        let mut e = vec![0.0; entries];
        // B⁻¹e = α_b V K⁻¹ e₁, blockwise.
        let mut b_inv_e = vec![0.0; entries];
        let mut schur = 0.0;
        for (b, pairing) in self.pairings.iter().enumerate() {
            let (lo, hi) = (shape.starts[b], shape.starts[b + 1]);
            let (w, alpha) = (term.weight[b], border.alpha[b]);
            let (k10, k11) = pairing.capacitance_row1();
            for k in lo..hi {
                e[k] = w * alpha * term.vector[k];
                b_inv_e[k] = alpha * (other.vector[k] * k10 + term.vector[k] * k11);
            }
            schur += alpha * alpha * k11;
        }
        let mut h = vec![0.0; shape.rows];
        for (k, v) in b_inv_e.iter().enumerate() {
            h[shape.row_of[k]] += self.coupling[k] * v;
        }
        let mut s_inv_h = h.clone();
        cholesky_solve(&self.schur, shape.rows, &mut s_inv_h);
        schur += h.iter().zip(&s_inv_h).map(|(a, b)| a * b).sum::<f64>();
        if !(schur > 0.0 && schur.is_finite()) {
            return None;
        }
        let m_inv_e = self.solve(&e);
        Some(Bordered {
            m: self,
            e,
            m_inv_e,
            schur,
        })
    }

    /// `out = B⁻¹ v`, blockwise in `O(k)`:
    /// `v − QQᵀv + Q (I + G)⁻¹ Qᵀv`.
    fn apply_blocks(&self, v: &[f64], out: &mut [f64]) {
        for (b, pairing) in self.pairings.iter().enumerate() {
            let (lo, hi) = (self.shape.starts[b], self.shape.starts[b + 1]);
            let (q0, q1) = (&self.q0[lo..hi], &self.q1[lo..hi]);
            let d0: f64 = q0.iter().zip(&v[lo..hi]).map(|(q, x)| q * x).sum();
            let d1: f64 = q1.iter().zip(&v[lo..hi]).map(|(q, x)| q * x).sum();
            let (a, bb, c) = pairing.inner;
            let (c0, c1) = (a * d0 + bb * d1 - d0, bb * d0 + c * d1 - d1);
            for k in 0..hi - lo {
                out[lo + k] = v[lo + k] + q0[k] * c0 + q1[k] * c1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `M x` computed densely from the same terms.
    fn multiply(
        shape: &Shape,
        terms: &[RankOne<'_>],
        coupling: &Coupling<'_>,
        x: &[f64],
    ) -> Vec<f64> {
        let mut out = x.to_vec();
        for b in 0..shape.starts.len() - 1 {
            let (lo, hi) = (shape.starts[b], shape.starts[b + 1]);
            for term in terms {
                let dot: f64 = (lo..hi).map(|k| term.vector[k] * x[k]).sum();
                for (o, v) in out[lo..hi].iter_mut().zip(&term.vector[lo..hi]) {
                    *o += term.weight[b] * v * dot;
                }
            }
        }
        for u in 0..shape.rows {
            let dot: f64 = (0..x.len())
                .filter(|&k| shape.row_of[k] == u)
                .map(|k| coupling.vector[k] * x[k])
                .sum();
            for k in (0..x.len()).filter(|&k| shape.row_of[k] == u) {
                out[k] += coupling.vector[k] * dot / coupling.inverse_weight[u];
            }
        }
        out
    }

    #[test]
    fn woodbury_solve_inverts_the_coupled_matrix() {
        // Three blocks over three units; block 1 misses unit 1.
        let shape = Shape {
            starts: vec![0, 3, 5, 8],
            row_of: vec![0, 1, 2, 0, 2, 0, 1, 2],
            rows: 3,
        };
        let v1 = [0.3, 1.2, 0.7, 2.0, 0.1, 0.5, 0.9, 1.4];
        let v2 = [1.0, 0.2, 0.4, 0.3, 1.5, 0.8, 0.1, 0.6];
        let terms = [
            RankOne {
                weight: &[2.0, 0.5, 1e3],
                vector: &v1,
            },
            RankOne {
                weight: &[0.0, 3.0, 0.1],
                vector: &v2,
            },
        ];
        let a = [0.9, 0.4, 1.1, 0.2, 0.6, 1.3, 0.5, 0.8];
        let coupling = Coupling {
            vector: &a,
            inverse_weight: &[1e-3, 2.0, 0.5],
        };
        let f = factor(&shape, &terms, &coupling).unwrap();
        let rhs = [1.0, -2.0, 0.5, 3.0, -1.0, 0.25, 4.0, -0.5];
        let x = f.solve(&rhs);
        let back = multiply(&shape, &terms, &coupling, &x);
        for (got, want) in back.iter().zip(rhs) {
            assert!((got - want).abs() < 1e-9, "{back:?} vs {rhs:?}");
        }
    }
}
