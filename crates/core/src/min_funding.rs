//! Min-funding allocation of whole cores (Rinnegan §3.1, CPU agent):
//! cores are handed out in proportion to each claimant's weight (its
//! shares), nobody gets more than it can use (its runnable threads), and
//! what a claimant cannot use goes to the others. A single-threaded program
//! thus keeps one core and the rest go to the parallel ones, which can then
//! size their worker pools to cores they will not have to time-share.

/// One program's claim on a set of identical cores.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoreClaim {
    /// Relative weight (shares). Zero: only what everyone else leaves.
    pub weight: f64,
    /// Most cores it can use (its runnable threads).
    pub demand: u32,
}

/// Whole cores each claimant may use exclusively, in claim order.
///
/// The result never exceeds a claimant's demand, sums to
/// `min(cores, Σ demand)`, and splits in proportion to weight (rounded,
/// largest remainders first) among claimants whose demand is not met.
pub fn min_funding(cores: u32, claims: &[CoreClaim]) -> Vec<u32> {
    let mut given = vec![0u32; claims.len()];
    let weighted: Vec<usize> = (0..claims.len())
        .filter(|&i| usable_weight(claims[i].weight) > 0.0 && claims[i].demand > 0)
        .collect();
    let left = fill(cores, claims, &weighted, &mut given, |c| {
        usable_weight(c.weight)
    });
    // Zero-weight claimants split what the weighted ones could not use.
    let idle_only: Vec<usize> = (0..claims.len())
        .filter(|&i| usable_weight(claims[i].weight) == 0.0 && claims[i].demand > 0)
        .collect();
    fill(left, claims, &idle_only, &mut given, |_| 1.0);
    given
}

fn usable_weight(w: f64) -> f64 {
    if w.is_finite() && w > 0.0 { w } else { 0.0 }
}

/// Water-fills `cores` over `members` by `weight`, capped at demand, into
/// `given`; returns the cores nobody in `members` could use.
fn fill(
    cores: u32,
    claims: &[CoreClaim],
    members: &[usize],
    given: &mut [u32],
    weight: impl Fn(&CoreClaim) -> f64,
) -> u32 {
    let total_demand: u64 = members.iter().map(|&i| u64::from(claims[i].demand)).sum();
    if total_demand <= u64::from(cores) {
        for &i in members {
            given[i] = claims[i].demand;
        }
        return cores - total_demand as u32;
    }
    // Continuous water-filling: saturate whoever the proportional split
    // would over-serve, then split the rest among the others.
    let mut share = vec![0.0f64; claims.len()];
    let mut open: Vec<usize> = members.to_vec();
    let mut remaining = f64::from(cores);
    loop {
        let w_sum: f64 = open.iter().map(|&i| weight(&claims[i])).sum();
        let (sat, unsat): (Vec<usize>, Vec<usize>) = open
            .iter()
            .partition(|&&i| remaining * weight(&claims[i]) / w_sum >= f64::from(claims[i].demand));
        if sat.is_empty() {
            for &i in &unsat {
                share[i] = remaining * weight(&claims[i]) / w_sum;
            }
            break;
        }
        for &i in &sat {
            share[i] = f64::from(claims[i].demand);
            remaining -= share[i];
        }
        open = unsat;
        if open.is_empty() {
            break;
        }
    }
    // Whole cores: floors first, then the largest remainders.
    let mut used = 0u32;
    for &i in members {
        given[i] = (share[i].floor() as u32).min(claims[i].demand);
        used += given[i];
    }
    let mut order: Vec<usize> = members.to_vec();
    order.sort_by(|&a, &b| {
        let ra = share[a] - share[a].floor();
        let rb = share[b] - share[b].floor();
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    let mut spare = cores - used;
    for &i in order.iter().cycle().take(order.len() * 2) {
        if spare == 0 {
            break;
        }
        if given[i] < claims[i].demand {
            given[i] += 1;
            spare -= 1;
        }
    }
    spare
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(weight: f64, demand: u32) -> CoreClaim {
        CoreClaim { weight, demand }
    }

    #[test]
    fn single_threaded_program_leaves_the_rest_to_parallel_ones() {
        // Rinnegan's example: equal shares, one sequential and one parallel
        // program on 8 cores: 1 and 7, not 4 and 4.
        let got = min_funding(8, &[claim(10.0, 1), claim(10.0, 16)]);
        assert_eq!(got, vec![1, 7]);
    }

    #[test]
    fn contended_cores_follow_weights() {
        let got = min_funding(8, &[claim(30.0, 8), claim(10.0, 8)]);
        assert_eq!(got, vec![6, 2]);
    }

    #[test]
    fn zero_weight_gets_only_leftovers() {
        assert_eq!(min_funding(4, &[claim(10.0, 3), claim(0.0, 4)]), vec![3, 1]);
        assert_eq!(min_funding(4, &[claim(10.0, 4), claim(0.0, 4)]), vec![4, 0]);
    }

    #[test]
    fn nothing_claimed_gives_nothing() {
        assert_eq!(min_funding(4, &[]), Vec::<u32>::new());
        assert_eq!(min_funding(0, &[claim(1.0, 3)]), vec![0]);
    }
}
