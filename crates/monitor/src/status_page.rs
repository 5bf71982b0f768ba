//! One page of the status report (`ClientMsg::Status`): the daemon, the
//! units and coordination in full, and clients from an id on until the
//! page is full, by count or by encoded size.
//!
//! Everything in the report that lists clients is paged the same way, by
//! client id: a page covers ids from the `first_client` asked for up to
//! its `next_client` (not included), and carries the clients, unit
//! associations (`selection.clients`) and coordinated apps of those ids
//! only. So no page grows with the number of clients connected, and a
//! walk of pages lists every id once (`hetsched_protocol::Client::status`
//! puts the lists back together).

use hetsched_core::ids::ClientId;
use hetsched_protocol::{ClientStatus, CoordinatedApp, StatusPage, StatusReport, encoded_len};

/// Bytes the message tag of `DaemonMsg::Status` adds to a page's
/// encoding (a variant index below 128 is one varint byte).
const TAG_BYTES: usize = 1;
/// Bytes a list's element count may grow by as entries are added: a
/// count is a varint, 1 byte when empty and at most 5.
const COUNT_GROWTH_BYTES: usize = 4;

/// The page of `head` from id `first` on. `head` carries the daemon, the
/// units and coordination, with no clients, no unit's `selection.clients`
/// and no `coordination.apps`. The entries to page come as iterators, each
/// in ascending id order from `first` on: `clients` (built as they are
/// taken, so a page costs what it holds), `apps` (coordinated apps) and
/// `associated` (client, unit index) pairs. An id's entries go on the page
/// together; the page ends before the client that would make it
/// `max_clients` + 1, or before the id whose entries would take its
/// encoding (with the message tag) past `budget` bytes. The first id
/// always goes on (unless `max_clients` is 0 and it has a client), so a
/// walk moves on even past an entry larger than the budget.
#[allow(clippy::too_many_arguments)]
pub fn fill(
    head: StatusReport,
    clients: impl Iterator<Item = ClientStatus>,
    apps: impl Iterator<Item = CoordinatedApp>,
    associated: impl Iterator<Item = (ClientId, usize)>,
    clients_total: u32,
    first: ClientId,
    max_clients: u32,
    budget: usize,
) -> StatusPage {
    let mut page = StatusPage {
        report: head,
        clients_total,
        // The longest it can be, for the size below.
        next_client: Some(ClientId(u32::MAX)),
    };
    let lists = 2 + page
        .report
        .units
        .iter()
        .filter(|u| u.selection.is_some())
        .count();
    let mut used = TAG_BYTES + encoded_len(&page) + lists * COUNT_GROWTH_BYTES;
    let mut clients = clients.peekable();
    let mut apps = apps.peekable();
    let mut associated = associated.peekable();
    let mut taken = 0u32;
    let mut empty = true;
    let mut last: Option<ClientId> = None;
    page.next_client = loop {
        let next = [
            clients.peek().map(|c| c.id),
            apps.peek().map(|a| a.client),
            associated.peek().map(|&(c, _)| c),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(id) = next else {
            break None;
        };
        debug_assert!(
            id >= first && last.is_none_or(|l| l < id),
            "ids out of order"
        );
        last = Some(id);
        let client = clients.next_if(|c| c.id == id);
        let mut its_apps = Vec::new();
        while let Some(a) = apps.next_if(|a| a.client == id) {
            its_apps.push(a);
        }
        let mut units = Vec::new();
        while let Some((_, u)) = associated.next_if(|&(c, _)| c == id) {
            units.push(u);
        }
        let cost = client.as_ref().map_or(0, encoded_len)
            + its_apps.iter().map(encoded_len).sum::<usize>()
            + units.len() * encoded_len(&id);
        let full = client.is_some() && taken >= max_clients;
        if full || (!empty && used + cost > budget) {
            break Some(id);
        }
        used += cost;
        empty = false;
        if let Some(c) = client {
            page.report.clients.push(c);
            taken += 1;
        }
        if let Some(co) = page.report.coordination.as_mut() {
            co.apps.extend(its_apps);
        }
        for u in units {
            if let Some(sel) = page
                .report
                .units
                .get_mut(u)
                .and_then(|s| s.selection.as_mut())
            {
                sel.clients.push(id);
            }
        }
    };
    page
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::ids::UnitId;
    use hetsched_core::unit::UnitClass;
    use hetsched_protocol::{
        CoordinationStatus, DaemonMsg, DaemonStatus, UnitInfo, UnitSelectionStatus, UnitStatus,
    };

    fn head(coordination: bool) -> StatusReport {
        StatusReport {
            daemon: DaemonStatus {
                version: "t".into(),
                pid: 1,
                uptime_ns: 0,
                socket: "s".into(),
            },
            units: vec![UnitStatus {
                info: UnitInfo::new(UnitId(0), "gpu0", "gpu", UnitClass::Gpu)
                    .with_coherent(false)
                    .with_emulated(true),
                view: Default::default(),
                queued_by_class: [0; 3],
                busy_ns_total: 0,
                selection: Some(UnitSelectionStatus {
                    memory_bytes: 1 << 30,
                    allocated_bytes: 0,
                    max_clients: 8,
                    clients: Vec::new(),
                    weight: 1.0,
                }),
            }],
            clients: Vec::new(),
            coordination: coordination.then(|| CoordinationStatus {
                solves: 0,
                floor: None,
                floor_feasible: None,
                apps: Vec::new(),
                short_first: Vec::new(),
            }),
        }
    }

    fn client(id: u32) -> ClientStatus {
        ClientStatus {
            id: ClientId(id),
            pid: id,
            uid: 0,
            name: "x".repeat(64),
            connected_ns: 0,
            units: Vec::new(),
            intercepted: None,
            device_memory_bytes: 0,
            device_memory_limit: None,
        }
    }

    fn app(id: u32) -> CoordinatedApp {
        CoordinatedApp {
            client: ClientId(id),
            pid: id,
            rate: Some(1.0),
            fractions: vec![1.0],
            native: None,
            predicted_relative: None,
            over_reported: 0,
            coordinated: true,
        }
    }

    fn ids(p: &StatusPage) -> Vec<u32> {
        p.report.clients.iter().map(|c| c.id.0).collect()
    }

    #[test]
    fn a_page_stops_at_max_clients_and_names_the_next() {
        let p = fill(
            head(false),
            (5..20).map(client),
            std::iter::empty(),
            std::iter::empty(),
            15,
            ClientId(5),
            4,
            usize::MAX,
        );
        assert_eq!(ids(&p), [5, 6, 7, 8]);
        assert_eq!(p.next_client, Some(ClientId(9)));
        assert_eq!(p.clients_total, 15);
        let none = fill(
            head(false),
            (5..20).map(client),
            std::iter::empty(),
            std::iter::empty(),
            15,
            ClientId(5),
            0,
            usize::MAX,
        );
        assert!(ids(&none).is_empty());
        assert_eq!(none.next_client, Some(ClientId(5)));
    }

    #[test]
    fn a_page_stops_before_the_budget_and_always_moves_on() {
        let budget = 2000;
        let p = fill(
            head(true),
            (1..100).map(client),
            (1..100).map(app),
            (1..100).map(|c| (ClientId(c), 0)),
            99,
            ClientId(1),
            u32::MAX,
            budget,
        );
        let n = p.report.clients.len();
        assert!(n > 1 && n < 99, "{n} clients");
        assert!(encoded_len(&DaemonMsg::Status(p.clone())) <= budget);
        assert_eq!(p.next_client, Some(ClientId(n as u32 + 1)));
        // The apps and associations of exactly the page's ids.
        let want: Vec<u32> = (1..=n as u32).collect();
        let apps: Vec<u32> = p
            .report
            .coordination
            .as_ref()
            .unwrap()
            .apps
            .iter()
            .map(|a| a.client.0)
            .collect();
        assert_eq!(apps, want);
        let sel: Vec<u32> = p.report.units[0]
            .selection
            .as_ref()
            .unwrap()
            .clients
            .iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(sel, want);
        // A budget nothing fits in still gives one client a page.
        let tiny = fill(
            head(true),
            (1..100).map(client),
            (1..100).map(app),
            std::iter::empty(),
            99,
            ClientId(1),
            u32::MAX,
            10,
        );
        assert_eq!(ids(&tiny), [1]);
        assert_eq!(tiny.next_client, Some(ClientId(2)));
    }

    /// Apps of clients gone since the coordinator's last tick are paged by
    /// their id like the rest: on the page whose range holds it, counted
    /// in its size, and the last page ends after them.
    #[test]
    fn entries_without_a_client_are_paged_by_their_id() {
        let p = fill(
            head(true),
            [2, 4].into_iter().map(client),
            [1, 3, 4, 9].into_iter().map(app),
            std::iter::empty(),
            2,
            ClientId(0),
            1,
            usize::MAX,
        );
        assert_eq!(ids(&p), [2]);
        assert_eq!(p.next_client, Some(ClientId(4)));
        let apps: Vec<u32> = p
            .report
            .coordination
            .as_ref()
            .unwrap()
            .apps
            .iter()
            .map(|a| a.client.0)
            .collect();
        assert_eq!(apps, [1, 3]);
        let last = fill(
            head(true),
            [4].into_iter().map(client),
            [4, 9].into_iter().map(app),
            std::iter::empty(),
            2,
            ClientId(4),
            1,
            usize::MAX,
        );
        assert_eq!(ids(&last), [4]);
        assert_eq!(last.next_client, None);
        assert_eq!(last.report.coordination.unwrap().apps.len(), 2);
    }
}
