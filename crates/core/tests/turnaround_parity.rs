//! The core's placement formula gives the parity table's figures, and the
//! placer's `predict` is that formula over the client's view.

#[path = "parity/cases.rs"]
mod cases;

use hetsched_core::turnaround::turnaround;

#[test]
fn core_formula_gives_the_tables_figures() {
    for case in cases::cases() {
        let got = turnaround(&case.input);
        match (got, case.expected) {
            (None, None) => {}
            (Some(got), Some(want)) => {
                assert!(
                    cases::close(got.turnaround_ns, want.turnaround_ns),
                    "{}: turnaround {} vs {}",
                    case.name,
                    got.turnaround_ns,
                    want.turnaround_ns
                );
                assert!(
                    cases::close(got.rate_per_s, want.rate_per_s),
                    "{}: rate {} vs {}",
                    case.name,
                    got.rate_per_s,
                    want.rate_per_s
                );
            }
            (got, want) => panic!("{}: got {got:?}, want {want:?}", case.name),
        }
    }
}
