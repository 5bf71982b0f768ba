//! STUB — replaced by the proportional-fair bound (owner: fairness helper).
