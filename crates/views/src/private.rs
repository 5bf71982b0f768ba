//! The private page: what one client can expect from every unit (Rinnegan's
//! Table 1, "Private" rows), and the cores it may use exclusively.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::AtomicU64;

use hetsched_core::view::ClientUnitView;

use crate::error::ViewError;
use crate::global::{check_index, check_len};
use crate::layout::{Layout, PageKind, header, private_cpu_kind, private_tail, private_unit};
use crate::page::{PageReader, PageWriter, load, load_f64, store, store_f64};

/// Everything on one private page, read at one instant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PrivateSnapshot {
    /// The writer's clock at that publish, ns (0 before the first).
    pub published_at_ns: u64,
    /// The publish's sequence number (even; 0 before the first publish).
    pub seq: u64,
    /// The client the page was last published for.
    pub client_id: u32,
    /// One per unit.
    pub units: Vec<ClientUnitView>,
    /// Per CPU kind: cores this client may use exclusively (min-funding).
    pub exclusive_cores: Vec<u32>,
    /// Proportional-fair coordination, when the daemon runs it and has
    /// solved for this client.
    pub targets: Option<Targets>,
}

/// What proportional-fair coordination asks of one client
/// ([`hetsched_core::coordination`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Targets {
    /// Calls per second the allocation gives the client (it paces itself
    /// to this).
    pub rate: f64,
    /// Per unit, the fraction of the client's calls it should run (0 where
    /// none).
    pub fractions: Vec<f64>,
}

/// The daemon's side of one client's private page.
#[derive(Debug)]
pub struct PrivateWriter {
    page: PageWriter,
}

impl PrivateWriter {
    /// Creates a sealed page for `n_units` units and `n_cpu_kinds` CPU kinds.
    /// Until the first publish (`seq` 0) every unit reads as
    /// [`ClientUnitView::default`] (an idle, uncapped unit) and no core is
    /// exclusive.
    pub fn create(n_units: usize, n_cpu_kinds: usize) -> Result<Self, ViewError> {
        let idle = ClientUnitView::default();
        let page = PageWriter::create(PageKind::Private, n_units, n_cpu_kinds, |layout, slots| {
            for i in 0..layout.n_units {
                write_unit(slots, layout.unit_at(i), &idle);
            }
        })?;
        Ok(PrivateWriter { page })
    }

    /// The page's memfd, to send to its client, until
    /// [`PrivateWriter::release_fd`]. The client can only map it read-only.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.page.fd()
    }

    /// Closes the memfd once it is sent: the page's one reader has it, and
    /// the writer's mapping stays. A daemon with thousands of clients then
    /// holds one descriptor per client (its socket), not two.
    pub fn release_fd(&mut self) {
        self.page.release_fd();
    }

    pub fn n_units(&self) -> usize {
        self.page.layout().n_units
    }

    pub fn n_cpu_kinds(&self) -> usize {
        self.page.layout().n_cpu_kinds
    }

    /// Publishes the client's view of every unit and its exclusive cores per
    /// CPU kind at once (one seqlock write).
    ///
    /// Fails, writing nothing, unless `units` and `exclusive_cores` have
    /// exactly the page's counts.
    pub fn publish(
        &mut self,
        now_ns: u64,
        client_id: u32,
        units: &[ClientUnitView],
        exclusive_cores: &[u32],
    ) -> Result<(), ViewError> {
        self.publish_with_targets(now_ns, client_id, units, exclusive_cores, None)
    }

    /// [`PrivateWriter::publish`], with the client's coordination targets
    /// (`None`: no targets, the client places on its own).
    ///
    /// Fails, writing nothing, unless `targets` has one fraction per unit.
    pub fn publish_with_targets(
        &mut self,
        now_ns: u64,
        client_id: u32,
        units: &[ClientUnitView],
        exclusive_cores: &[u32],
        targets: Option<&Targets>,
    ) -> Result<(), ViewError> {
        check_len("units", units.len(), self.n_units())?;
        check_len("CPU kinds", exclusive_cores.len(), self.n_cpu_kinds())?;
        if let Some(t) = targets {
            check_len("target fractions", t.fractions.len(), self.n_units())?;
        }
        self.page.publish(now_ns, |layout, slots| {
            store(slots, header::CLIENT_ID, client_id.into());
            for (i, u) in units.iter().enumerate() {
                write_unit(slots, layout.unit_at(i), u);
            }
            for (k, &c) in exclusive_cores.iter().enumerate() {
                store(
                    slots,
                    layout.cpu_kind_at(k) + private_cpu_kind::EXCLUSIVE_CORES,
                    c.into(),
                );
            }
            for i in 0..layout.n_units {
                let f = targets.map_or(f64::NAN, |t| t.fractions[i]);
                store_f64(slots, layout.unit_at(i) + private_unit::TARGET_FRACTION, f);
            }
            let rate = targets.map_or(f64::NAN, |t| t.rate);
            store_f64(slots, layout.tail_at() + private_tail::TARGET_RATE, rate);
        });
        Ok(())
    }
}

/// A client's read-only view of its private page. Lock-free; share it
/// between threads freely.
#[derive(Debug)]
pub struct PrivateReader {
    page: PageReader,
}

impl PrivateReader {
    /// Accepts a private page's fd as received from the daemon; see
    /// [`crate::GlobalReader::from_fd`] for what is checked.
    pub fn from_fd(fd: OwnedFd) -> Result<Self, ViewError> {
        Ok(PrivateReader {
            page: PageReader::from_fd(PageKind::Private, fd)?,
        })
    }

    pub fn n_units(&self) -> usize {
        self.page.layout().n_units
    }

    pub fn n_cpu_kinds(&self) -> usize {
        self.page.layout().n_cpu_kinds
    }

    /// This client's view of unit `i`; `None` when `i` is out of range or
    /// the writer stalled mid-publish.
    #[inline]
    pub fn unit(&self, i: usize) -> Option<ClientUnitView> {
        self.try_unit(i).ok()
    }

    /// This client's view of unit `i` as last published, never torn.
    #[inline]
    pub fn try_unit(&self, i: usize) -> Result<ClientUnitView, ViewError> {
        check_index("unit", i, self.n_units())?;
        let at = self.page.layout().unit_at(i);
        self.page
            .read(|_, slots| read_unit(slots, at))
            .map(|(u, _)| u)
    }

    /// Cores of CPU kind `k` this client may use exclusively; `None` when
    /// out of range or stalled.
    pub fn exclusive_cores(&self, k: usize) -> Option<u32> {
        check_index("CPU kind", k, self.n_cpu_kinds()).ok()?;
        let at = self.page.layout().cpu_kind_at(k) + private_cpu_kind::EXCLUSIVE_CORES;
        self.page
            .read(|_, slots| load(slots, at) as u32)
            .ok()
            .map(|(c, _)| c)
    }

    /// The coordination targets of the last publish, into `fractions` (one
    /// per unit); returns the rate, or `None` when the daemon published no
    /// targets for this client (or the writer stalled).
    pub fn targets_into(&self, fractions: &mut Vec<f64>) -> Option<f64> {
        let (rate, _) = self
            .page
            .read(|layout, slots| read_targets(slots, layout, fractions))
            .ok()?;
        rate
    }

    /// The client id of the last publish; `None` before the first publish
    /// or when stalled.
    pub fn client_id(&self) -> Option<u32> {
        match self
            .page
            .read(|_, slots| load(slots, header::CLIENT_ID) as u32)
        {
            Ok((_, 0)) | Err(_) => None,
            Ok((id, _)) => Some(id),
        }
    }

    /// The sequence number of the last complete publish (0: none yet).
    pub fn seq(&self) -> Result<u64, ViewError> {
        self.page.read(|_, _| ()).map(|((), seq)| seq)
    }

    /// The whole page at one instant; fails only if the writer stalled.
    pub fn snapshot(&self) -> Result<PrivateSnapshot, ViewError> {
        let mut s = PrivateSnapshot::default();
        self.snapshot_into(&mut s)?;
        Ok(s)
    }

    /// [`PrivateReader::snapshot`] into `out`, reusing its vectors.
    pub fn snapshot_into(&self, out: &mut PrivateSnapshot) -> Result<(), ViewError> {
        let ((), seq) = self.page.read(|layout, slots| {
            out.published_at_ns = load(slots, header::PUBLISHED_AT_NS);
            out.client_id = load(slots, header::CLIENT_ID) as u32;
            out.units.clear();
            out.units
                .extend((0..layout.n_units).map(|i| read_unit(slots, layout.unit_at(i))));
            out.exclusive_cores.clear();
            out.exclusive_cores.extend((0..layout.n_cpu_kinds).map(|k| {
                load(
                    slots,
                    layout.cpu_kind_at(k) + private_cpu_kind::EXCLUSIVE_CORES,
                ) as u32
            }));
            let mut fractions = Vec::new();
            out.targets =
                read_targets(slots, layout, &mut fractions).map(|rate| Targets { rate, fractions });
        })?;
        out.seq = seq;
        Ok(())
    }
}

/// Reads the tail's rate and every unit's target fraction; `None` (and
/// `fractions` left empty) when no targets are published.
fn read_targets(slots: &[AtomicU64], layout: &Layout, fractions: &mut Vec<f64>) -> Option<f64> {
    fractions.clear();
    let rate = load_f64(slots, layout.tail_at() + private_tail::TARGET_RATE);
    if !rate.is_finite() || rate <= 0.0 {
        return None;
    }
    fractions.extend((0..layout.n_units).map(|i| {
        let f = load_f64(slots, layout.unit_at(i) + private_unit::TARGET_FRACTION);
        if f.is_finite() && f > 0.0 { f } else { 0.0 }
    }));
    Some(rate)
}

fn write_unit(slots: &[AtomicU64], at: usize, u: &ClientUnitView) {
    use private_unit::*;
    let r = &slots[at..at + SLOTS];
    store_f64(r, GUARANTEED, u.guaranteed);
    store_f64(r, WAIT_NS, u.wait_ns);
    store_f64(r, CURRENT_UTILISATION, u.current_utilisation);
    store(r, THROTTLED, u.throttled.into());
    store_f64(r, MAX_UTILISATION, u.max_utilisation);
}

#[inline]
fn read_unit(slots: &[AtomicU64], at: usize) -> ClientUnitView {
    use private_unit::*;
    let r: &[AtomicU64; SLOTS] = slots[at..at + SLOTS]
        .try_into()
        .expect("record slice has the record's length");
    ClientUnitView {
        guaranteed: load_f64(r, GUARANTEED),
        wait_ns: load_f64(r, WAIT_NS),
        current_utilisation: load_f64(r, CURRENT_UTILISATION),
        throttled: load(r, THROTTLED) != 0,
        max_utilisation: load_f64(r, MAX_UTILISATION),
    }
}
