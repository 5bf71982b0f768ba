//! STUB — replaced by the policy helper.
#[derive(Debug, Default)]
pub struct ClientLedger;
#[derive(Debug, Default)]
pub struct LedgerEntry;
