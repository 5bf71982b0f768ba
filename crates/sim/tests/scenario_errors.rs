//! Bad scenario files get an error naming the file, the line and the field,
//! never a panic.

use hetsched_sim::scenario::{ScenarioError, parse};
use proptest::prelude::*;

const GOOD: &str = r#"name = "tiny"
duration_s = 1
policies = ["hetsched"]

[[units]]
name = "cpu"
class = "cpu"

[[units]]
name = "gpu"
class = "gpu"
policy = "share"
copy = { latency_us = 10, in_gb_s = 6, out_gb_s = 6 }

[[apps]]
name = "a"
bytes = { kib = 64 }
class = "custom"
shares = { gpu = 60 }
exec_ms = { cpu = 2.0, gpu = 0.5 }

[[apps]]
name = "b"
bytes = { min_kib = 1, max_kib = 8 }
exec_ms = { gpu = 1.0 }
"#;

fn err(text: &str) -> ScenarioError {
    parse("bad.toml", text).expect_err("the scenario must be rejected")
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .expect("needle in text")
        + 1
}

#[test]
fn the_reference_scenario_is_valid() {
    let sc = parse("good.toml", GOOD).unwrap();
    assert_eq!(sc.machine.units.len(), 2);
    assert_eq!(sc.apps.len(), 2);
    assert!(
        sc.apps[1].exec_ns[0].is_none(),
        "b has no CPU implementation"
    );
}

#[test]
fn unknown_field_names_line_and_field() {
    let text = GOOD.replace("duration_s = 1", "duration_s = 1\ndurashun = 3");
    let e = err(&text);
    assert_eq!(e.line, Some(line_of(&text, "durashun")));
    assert!(e.message.contains("durashun"), "{e}");
    assert!(e.to_string().starts_with("bad.toml:3:"), "{e}");
}

#[test]
fn throughput_goals_must_be_positive_and_adapting_needs_one() {
    let goal = |extra: &str| {
        GOOD.replace(
            "exec_ms = { gpu = 1.0 }",
            &format!("exec_ms = {{ gpu = 1.0 }}\n{extra}"),
        )
    };
    let sc = parse(
        "good.toml",
        &goal("throughput_goal = 20.0\nadapt_step = 0.2"),
    )
    .unwrap();
    let g = sc.apps[1].throughput_goal.expect("a goal");
    assert_eq!((g.tasks_per_s, g.adapt_step), (20.0, 0.2));

    let text = goal("throughput_goal = 0.0");
    let e = err(&text);
    assert_eq!(e.field, "apps[1].throughput_goal");
    assert!(e.message.contains("positive"), "{e}");

    let e = err(&goal("adapt_step = 0.2"));
    assert_eq!(e.field, "apps[1].adapt_step");
    assert!(e.message.contains("throughput_goal"), "{e}");

    let e = err(&goal("throughput_goal = 5.0\nadapt_step = 0.95"));
    assert_eq!(e.field, "apps[1].adapt_step");
}

#[test]
fn unknown_unit_class() {
    let text = GOOD.replace("class = \"gpu\"", "class = \"fpga\"");
    let e = err(&text);
    assert_eq!(e.line, Some(line_of(&text, "fpga")));
    assert_eq!(e.field, "units[1].class");
    assert!(e.message.contains("unknown unit class `fpga`"), "{e}");
}

#[test]
fn negative_sizes_are_rejected() {
    let text = GOOD.replace("kib = 64", "kib = -64");
    let e = err(&text);
    assert_eq!(e.line, Some(line_of(&text, "kib = -64")));
    let text = GOOD.replace("gpu = 0.5", "gpu = -0.5");
    let e = err(&text);
    assert_eq!(e.field, "apps[0].exec_ms.gpu");
    assert_eq!(e.line, Some(line_of(&text, "gpu = -0.5")));
}

#[test]
fn a_replay_budget_of_zero_is_rejected_and_a_positive_one_kept() {
    let text = GOOD.replace(
        "duration_s = 1",
        "duration_s = 1\nreplay_events_per_solve = 0",
    );
    let e = err(&text);
    assert_eq!(e.field, "replay_events_per_solve");
    assert!(e.message.contains("positive"), "{e}");
    let text = GOOD.replace(
        "duration_s = 1",
        "duration_s = 1\nreplay_events_per_solve = 500",
    );
    let sc = parse("good.toml", &text).unwrap();
    assert_eq!(sc.replay_events_per_solve, Some(500));
    assert_eq!(
        parse("good.toml", GOOD).unwrap().replay_events_per_solve,
        None
    );
}

#[test]
fn a_pick_slice_is_kept_zero_included_and_none_by_default() {
    for value in [0u64, 80_000] {
        let text = GOOD.replace(
            "duration_s = 1",
            &format!("duration_s = 1\npick_slice_events = {value}"),
        );
        let sc = parse("good.toml", &text).unwrap();
        assert_eq!(sc.pick_slice_events, Some(value));
    }
    assert_eq!(parse("good.toml", GOOD).unwrap().pick_slice_events, None);
    let text = GOOD.replace("duration_s = 1", "duration_s = 1\npick_slice_events = -1");
    // Refused by the parser, at its line.
    let e = err(&text);
    assert_eq!(e.line, Some(line_of(&text, "pick_slice_events = -1")));
    assert!(e.message.contains("u64"), "{e}");
}

#[test]
fn a_negative_full_resolve_period_is_rejected_and_zero_kept() {
    let with = |value: &str| {
        GOOD.replace(
            "duration_s = 1",
            &format!("duration_s = 1\nfull_resolve_period_s = {value}"),
        )
    };
    for bad in ["-1", "nan", "inf"] {
        let e = err(&with(bad));
        assert_eq!(e.field, "full_resolve_period_s", "{bad}");
        assert!(e.message.contains("zero or positive"), "{e}");
    }
    for (value, ns) in [("0", 0), ("2.5", 2_500_000_000)] {
        let sc = parse("good.toml", &with(value)).unwrap();
        assert_eq!(sc.full_resolve_period_ns, Some(ns), "{value}");
    }
    let sc = parse("good.toml", GOOD).unwrap();
    assert_eq!(sc.full_resolve_period_ns, None);
}

#[test]
fn custom_shares_over_100_are_rejected_by_the_policy() {
    let text = GOOD.replace(
        "exec_ms = { gpu = 1.0 }",
        "exec_ms = { gpu = 1.0 }\nclass = \"custom\"\nshares = { gpu = 50 }",
    );
    let e = err(&text);
    assert_eq!(e.field, "apps[1].shares.gpu");
    assert_eq!(e.line, Some(line_of(&text, "shares = { gpu = 50 }")));
    assert!(e.message.contains("110"), "names the total: {e}");
}

#[test]
fn an_app_without_any_implementation() {
    let text = GOOD.replace("exec_ms = { gpu = 1.0 }", "exec_ms = {}");
    let e = err(&text);
    assert_eq!(e.field, "apps[1].exec_ms");
    assert!(e.message.contains("no implementation"), "{e}");
}

#[test]
fn an_implementation_for_an_unknown_unit() {
    let text = GOOD.replace(
        "exec_ms = { gpu = 1.0 }",
        "exec_ms = { gpu = 1.0, tpu = 1.0 }",
    );
    let e = err(&text);
    assert_eq!(e.field, "apps[1].exec_ms.tpu");
    assert!(e.message.contains("unknown unit `tpu`"), "{e}");
}

#[test]
fn unknown_policy_lists_the_known_ones() {
    let text = GOOD.replace("[\"hetsched\"]", "[\"hetsched\", \"magic\"]");
    let e = err(&text);
    assert_eq!(e.field, "policies[1]");
    assert!(e.message.contains("c-sched"), "{e}");
}

#[test]
fn non_coherent_unit_without_copy_cost() {
    let text = GOOD.replace(
        "copy = { latency_us = 10, in_gb_s = 6, out_gb_s = 6 }\n",
        "",
    );
    let e = err(&text);
    assert_eq!(e.field, "units[1].copy");
}

#[test]
fn syntax_errors_have_a_line() {
    let e = err("name = \"x\"\nduration_s = = 2\n");
    assert_eq!(e.line, Some(2));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Any edit of a valid file parses or fails cleanly.
    #[test]
    fn mangled_files_never_panic(at in 0usize..GOOD.len(), len in 0usize..8, insert in "[-a-z0-9=\\[\\]{}\", .\n]{0,6}") {
        let mut text = GOOD.to_string();
        let start = (0..=at).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        let end = (start + len).min(text.len());
        let end = (end..=text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
        text.replace_range(start..end, &insert);
        if let Err(e) = parse("mangled.toml", &text) {
            prop_assert!(e.to_string().starts_with("mangled.toml"));
        }
    }
}
