//! The status report in pages ([`ClientMsg::Status`](crate::ClientMsg)):
//! how a client walks them by client id and puts the whole report back
//! together. The daemon's side (filling a page up to
//! [`crate::STATUS_PAGE_BYTES`]) is `hetsched_daemon::status_page`.

use crate::message::{StatusPage, StatusReport};
use hetsched_core::ids::ClientId;

/// Asks `fetch` for the page at client id 0, then for each page where the
/// last one said the next starts, and returns the pages put together
/// ([`assemble`]). A page whose `next_client` does not move past its own
/// start is the daemon's error, not a reason to ask for ever: `unexpected`
/// makes it the caller's error type from its words.
pub(crate) fn walk<E>(
    mut fetch: impl FnMut(ClientId) -> Result<StatusPage, E>,
    unexpected: impl FnOnce(String) -> E,
) -> Result<StatusReport, E> {
    let mut at = ClientId(0);
    let mut pages = Vec::new();
    loop {
        let page = fetch(at)?;
        let next = page.next_client;
        pages.push(page.report);
        match next {
            None => return Ok(assemble(pages)),
            Some(n) if n <= at => {
                return Err(unexpected(format!(
                    "the status page from client {} says the next one starts at {}",
                    at.0, n.0
                )));
            }
            Some(n) => at = n,
        }
    }
}

/// One report from consecutive pages: the daemon, units and coordination
/// figures of the first, and the client lists of all of them (clients,
/// each unit's associated clients, coordinated apps) concatenated, in id
/// order, each id once (the first page's entry, should a daemon ever send
/// one twice).
pub(crate) fn assemble(pages: Vec<StatusReport>) -> StatusReport {
    let mut pages = pages.into_iter();
    let Some(mut whole) = pages.next() else {
        panic!("assemble needs at least one page");
    };
    for page in pages {
        whole.clients.extend(page.clients);
        for (unit, more) in whole.units.iter_mut().zip(page.units) {
            if let (Some(sel), Some(more)) = (unit.selection.as_mut(), more.selection) {
                sel.clients.extend(more.clients);
            }
        }
        if let (Some(c), Some(more)) = (whole.coordination.as_mut(), page.coordination) {
            c.apps.extend(more.apps);
        }
    }
    whole.clients.sort_by_key(|c| c.id);
    whole.clients.dedup_by_key(|c| c.id);
    for sel in whole.units.iter_mut().filter_map(|u| u.selection.as_mut()) {
        sel.clients.sort();
        sel.clients.dedup();
    }
    if let Some(c) = whole.coordination.as_mut() {
        c.apps.sort_by_key(|a| a.client);
        c.apps.dedup_by_key(|a| a.client);
    }
    whole
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientError;
    use crate::message::{
        ClientStatus, CoordinatedApp, CoordinationStatus, DaemonStatus, UnitInfo,
        UnitSelectionStatus, UnitStatus,
    };
    use hetsched_core::ids::UnitId;
    use hetsched_core::unit::UnitClass;

    fn client(id: u32) -> ClientStatus {
        ClientStatus {
            id: ClientId(id),
            pid: 1000 + id,
            uid: 0,
            name: format!("c{id}"),
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
            pid: 1000 + id,
            rate: None,
            fractions: Vec::new(),
            native: None,
            predicted_relative: None,
            over_reported: 0,
            coordinated: true,
        }
    }

    /// A page of the clients `ids` (with their apps and associations).
    fn page(ids: &[u32], next: Option<u32>) -> StatusPage {
        StatusPage {
            report: StatusReport {
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
                        memory_bytes: 1,
                        allocated_bytes: 0,
                        max_clients: 8,
                        clients: ids.iter().map(|&i| ClientId(i)).collect(),
                        weight: 1.0,
                    }),
                }],
                clients: ids.iter().map(|&i| client(i)).collect(),
                coordination: Some(CoordinationStatus {
                    solves: 1,
                    floor: None,
                    floor_feasible: None,
                    apps: ids.iter().map(|&i| app(i)).collect(),
                    short_first: Vec::new(),
                }),
            },
            clients_total: 5,
            next_client: next.map(ClientId),
        }
    }

    #[test]
    fn a_walk_follows_next_client_and_concatenates_every_list() {
        let pages = [
            (0, page(&[1, 2], Some(3))),
            (3, page(&[3, 4], Some(7))),
            (7, page(&[7], None)),
        ];
        let mut asked = Vec::new();
        let whole = walk(
            |at| {
                asked.push(at.0);
                let (_, p) = pages.iter().find(|(start, _)| *start == at.0).unwrap();
                Ok(p.clone())
            },
            ClientError::Unexpected,
        )
        .unwrap();
        assert_eq!(asked, [0, 3, 7]);
        let ids: Vec<u32> = whole.clients.iter().map(|c| c.id.0).collect();
        assert_eq!(ids, [1, 2, 3, 4, 7]);
        let sel: Vec<u32> = whole.units[0]
            .selection
            .as_ref()
            .unwrap()
            .clients
            .iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(sel, [1, 2, 3, 4, 7]);
        let apps: Vec<u32> = whole
            .coordination
            .unwrap()
            .apps
            .iter()
            .map(|a| a.client.0)
            .collect();
        assert_eq!(apps, [1, 2, 3, 4, 7]);
    }

    #[test]
    fn a_client_sent_twice_is_listed_once() {
        let whole = assemble(vec![
            page(&[1, 2], Some(2)).report,
            page(&[2, 3], None).report,
        ]);
        let ids: Vec<u32> = whole.clients.iter().map(|c| c.id.0).collect();
        assert_eq!(ids, [1, 2, 3]);
        assert_eq!(whole.coordination.unwrap().apps.len(), 3);
    }

    #[test]
    fn a_page_that_does_not_move_on_ends_the_walk_with_an_error() {
        let mut asked = 0;
        let err = walk(
            |at| {
                asked += 1;
                Ok(page(&[at.0 + 1], Some(at.0)))
            },
            ClientError::Unexpected,
        )
        .unwrap_err();
        assert_eq!(asked, 1);
        assert!(err.to_string().contains("next one starts at 0"), "{err}");
    }
}
