//! STUB — replaced by the policy helper.
use super::*;
#[derive(Debug)]
pub struct PriorityPolicy;
impl PriorityPolicy {
    pub fn new(_slots: u32) -> Self {
        PriorityPolicy
    }
}
impl UnitPolicy for PriorityPolicy {
    fn kind(&self) -> PolicyKind { todo!() }
    fn set_client(&mut self, _c: ClientId, _s: ClientSettings, _now: Ns) -> Result<(), PolicyError> { todo!() }
    fn remove_client(&mut self, _c: ClientId, _now: Ns) -> Vec<Request> { todo!() }
    fn submit(&mut self, _r: Request, _now: Ns) { todo!() }
    fn pick_next(&mut self, _now: Ns) -> Option<Request> { todo!() }
    fn complete(&mut self, _c: ClientId, _ran: Ns, _now: Ns) { todo!() }
    fn tick(&mut self, _now: Ns) { todo!() }
    fn retry_at(&self, _now: Ns) -> Option<Ns> { todo!() }
    fn client_view(&self, _c: ClientId, _now: Ns) -> ClientUnitView { todo!() }
    fn unit_view(&self, _now: Ns) -> UnitView { todo!() }
    fn queued(&self) -> usize { todo!() }
}
