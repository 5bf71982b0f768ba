//! The two plots, drawn with plotters' SVG backend into a string.
//!
//! `timeline.svg` follows Rinnegan Fig. 3: one panel per policy that recorded
//! a timeline (all of them, so the adaptive policies can be compared with the
//! static ones at a glance), one lane per app, bars coloured by the unit in
//! use. `relative.svg` shows per-app relative throughput as grouped bars, one
//! bar per policy plus the oracle's optimum, with a final geometric-mean group.
//! Non-finite values and empty or inverted intervals are skipped, not drawn.

use super::order::{app_order, unit_order};
use crate::report::{PolicyResult, ScenarioReport, TimelineSegment};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::error::Error;
use std::io;
use std::ops::Range;

type DrawResult<T> = Result<T, Box<dyn Error>>;
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Okabe–Ito colour-blind-safe palette; reused cyclically beyond eight entries.
const PALETTE: [RGBColor; 8] = [
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 158, 115),
    RGBColor(240, 228, 66),
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(204, 121, 167),
    RGBColor(0, 0, 0),
];
const ORACLE_COLOUR: RGBColor = RGBColor(160, 160, 160);
const FONT: &str = "sans-serif";

const TIMELINE_WIDTH: u32 = 1000;
const LEGEND_HEIGHT: u32 = 36;
const LANE_HEIGHT: u32 = 28;
/// Caption, x axis and margins of one timeline panel.
const PANEL_CHROME: u32 = 80;
/// Chart units per timeline lane and per bar group. These discrete axes are
/// integer-scaled because plotters only accepts custom tick positions
/// (`with_key_points`) plus a label formatter on integer axes.
const LANE: i32 = 100;
const GROUP: i32 = 1000;

pub(super) fn palette(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn to_io_error(e: Box<dyn Error>) -> io::Error {
    io::Error::other(e.to_string())
}

/// Rinnegan Fig. 3: which unit each app used over time, per policy.
pub fn render_timeline_svg(report: &ScenarioReport) -> io::Result<String> {
    render_timeline_svg_with_warmup(report, None)
}

/// [`render_timeline_svg`], with the first `warmup_s` seconds of every
/// panel shaded (a warm-up the figures do not count).
pub fn render_timeline_svg_with_warmup(
    report: &ScenarioReport,
    warmup_s: Option<f64>,
) -> io::Result<String> {
    let apps = app_order(report);
    let units = unit_order(report);
    let panels: Vec<&PolicyResult> = report
        .results
        .iter()
        .filter(|r| r.timeline.iter().any(|s| drawable(s).is_some()))
        .collect();
    let panel_height = PANEL_CHROME + LANE_HEIGHT * apps.len().max(1) as u32;
    let mut legend_items: Vec<String> = units.iter().map(|u| u.to_string()).collect();
    if warmup_s.is_some() {
        legend_items.push(WARMUP_LABEL.to_string());
    }
    let legend_height = LEGEND_HEIGHT * legend_rows(&legend_items).len().max(1) as u32;
    let height = legend_height + panel_height * panels.len().max(1) as u32;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (TIMELINE_WIDTH, height)).into_drawing_area();
        draw_timeline(&root, &panels, &apps, &units, warmup_s, legend_height)
            .map_err(to_io_error)?;
        root.present()
            .map_err(|e| io::Error::other(e.to_string()))?;
    }
    Ok(svg)
}

fn draw_timeline(
    root: &Area,
    panels: &[&PolicyResult],
    apps: &[&str],
    units: &[&str],
    warmup_s: Option<f64>,
    legend_height: u32,
) -> DrawResult<()> {
    root.fill(&WHITE)?;
    let (legend, body) = root.split_vertically(legend_height);
    draw_swatch_legend(&legend, units, warmup_s.is_some())?;
    if panels.is_empty() {
        body.draw(&Text::new("no timeline recorded", (20, 20), (FONT, 16)))?;
        return Ok(());
    }
    // Every panel uses the same time axis so they can be compared vertically.
    let time_range = panels
        .iter()
        .flat_map(|p| p.timeline.iter().filter_map(drawable))
        .fold(0.0..0.0, |range: Range<f64>, (start, end)| {
            range.start.min(start)..range.end.max(end)
        });
    for (area, policy) in body.split_evenly((panels.len(), 1)).iter().zip(panels) {
        draw_timeline_panel(area, policy, apps, units, time_range.clone(), warmup_s)?;
    }
    Ok(())
}

/// The segment's (start, end) when it is a finite, non-empty interval.
fn drawable(segment: &TimelineSegment) -> Option<(f64, f64)> {
    let (start, end) = (segment.start_s, segment.end_s);
    (start.is_finite() && end.is_finite() && end > start).then_some((start, end))
}

/// The legend entry of the shaded warm-up.
const WARMUP_LABEL: &str = "warm-up (not counted)";
/// Grey of the warm-up shading.
const WARMUP_SHADE: RGBColor = RGBColor(225, 225, 225);

/// Where each legend entry goes: (row, x), wrapping before the right edge
/// so that many units do not run off the figure.
fn legend_rows(labels: &[String]) -> Vec<Vec<(usize, i32)>> {
    let mut rows: Vec<Vec<(usize, i32)>> = vec![Vec::new()];
    let mut x = 20;
    for (i, label) in labels.iter().enumerate() {
        // The naive font estimate is about 8 px per character at this size.
        let width = 20 + 8 * label.chars().count() as i32 + 24;
        if x > 20 && x + width > TIMELINE_WIDTH as i32 - 20 {
            rows.push(Vec::new());
            x = 20;
        }
        rows.last_mut().expect("one row at least").push((i, x));
        x += width;
    }
    rows
}

/// Coloured squares with unit names (and the warm-up shade), drawn once
/// for all panels, in as many rows as they need.
fn draw_swatch_legend(area: &Area, units: &[&str], warmup: bool) -> DrawResult<()> {
    let mut labels: Vec<String> = units.iter().map(|u| u.to_string()).collect();
    if warmup {
        labels.push(WARMUP_LABEL.to_string());
    }
    for (row, entries) in legend_rows(&labels).iter().enumerate() {
        let y = 12 + row as i32 * LEGEND_HEIGHT as i32;
        for &(i, x) in entries {
            let colour = if i < units.len() {
                palette(i)
            } else {
                WARMUP_SHADE
            };
            area.draw(&Rectangle::new([(x, y), (x + 14, y + 14)], colour.filled()))?;
            area.draw(&Text::new(labels[i].clone(), (x + 20, y), (FONT, 14)))?;
        }
    }
    Ok(())
}

fn draw_timeline_panel(
    area: &Area,
    policy: &PolicyResult,
    apps: &[&str],
    units: &[&str],
    time_range: Range<f64>,
    warmup_s: Option<f64>,
) -> DrawResult<()> {
    let lanes = apps.len().max(1);
    // The first app gets the top lane, as in the paper; lane i spans
    // [i * LANE, (i + 1) * LANE) counted from the bottom.
    let lane_bottom = |app: &str| {
        let index = apps.iter().position(|a| *a == app)?;
        Some((lanes - 1 - index) as i32 * LANE)
    };
    let lane_centres: Vec<i32> = (0..apps.len() as i32)
        .map(|i| i * LANE + LANE / 2)
        .collect();
    let label_for_lane = |y: &i32| {
        let from_bottom = ((*y).max(0) / LANE) as usize;
        let index = (lanes - 1).saturating_sub(from_bottom);
        apps.get(index).map_or_else(String::new, |a| a.to_string())
    };

    let mut chart = ChartBuilder::on(area)
        .caption(&policy.policy, (FONT, 16))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(name_column_width(apps))
        .build_cartesian_2d(
            time_range.clone(),
            (0..lanes as i32 * LANE).with_key_points(lane_centres),
        )?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 13))
        .x_desc("time (s)")
        .y_label_formatter(&label_for_lane)
        .draw()?;

    if let Some(w) = warmup_s.filter(|w| *w > time_range.start) {
        let end = w.min(time_range.end);
        chart.draw_series([Rectangle::new(
            [(time_range.start, 0), (end, lanes as i32 * LANE)],
            WARMUP_SHADE.filled(),
        )])?;
    }
    let bars = policy.timeline.iter().filter_map(|segment| {
        let (start, end) = drawable(segment)?;
        let bottom = lane_bottom(&segment.app)?;
        let colour = palette(units.iter().position(|u| *u == segment.unit)?);
        // 15 % of the lane stays blank above and below so lanes read apart.
        Some(Rectangle::new(
            [
                (start, bottom + LANE * 15 / 100),
                (end, bottom + LANE * 85 / 100),
            ],
            colour.filled(),
        ))
    });
    chart.draw_series(bars)?;
    Ok(())
}

/// Room for the longest app name on the y axis.
fn name_column_width(names: &[&str]) -> u32 {
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0) as u32;
    (8 * longest + 16).clamp(40, 240)
}

/// One bar series: a policy's (or the oracle's) value per group.
struct BarSeries {
    name: String,
    colour: RGBColor,
    values: Vec<f64>,
}

/// Per-app `relative` for each policy and the oracle, plus a geometric-mean
/// group (system speedup), with a dashed line at 1.0 (native throughput).
pub fn render_relative_svg(report: &ScenarioReport) -> io::Result<String> {
    let apps = app_order(report);
    let mut groups: Vec<&str> = apps.clone();
    groups.push("geomean");
    let series = relative_series(report, &apps);

    let bar_slots = (series.len() * groups.len()) as u32;
    let width = (140 + 18 * bar_slots + 30 * groups.len() as u32).clamp(640, 4000);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, 480)).into_drawing_area();
        draw_relative(&root, &groups, &series, &report.scenario).map_err(to_io_error)?;
        root.present()
            .map_err(|e| io::Error::other(e.to_string()))?;
    }
    Ok(svg)
}

fn relative_series(report: &ScenarioReport, apps: &[&str]) -> Vec<BarSeries> {
    let mut series: Vec<BarSeries> = report
        .results
        .iter()
        .enumerate()
        .map(|(i, result)| BarSeries {
            name: result.policy.clone(),
            colour: palette(i),
            values: apps
                .iter()
                .map(|app| result.apps.get(*app).map_or(f64::NAN, |a| a.relative))
                .chain([result.system_speedup])
                .collect(),
        })
        .collect();
    series.push(BarSeries {
        name: "oracle".to_string(),
        colour: ORACLE_COLOUR,
        values: apps
            .iter()
            .map(|app| report.oracle_apps.get(*app).copied().unwrap_or(f64::NAN))
            .chain([report.oracle_system_speedup])
            .collect(),
    });
    series
}

fn draw_relative(
    root: &Area,
    groups: &[&str],
    series: &[BarSeries],
    scenario: &str,
) -> DrawResult<()> {
    root.fill(&WHITE)?;
    let finite: Vec<f64> = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .filter(|v| v.is_finite())
        .collect();
    let scale = YScale::for_values(&finite);
    // Always show the native line at 1.0, whatever the data; the headroom
    // above the tallest bar keeps the legend clear of the bars.
    let (lowest, highest) = scale.range(&finite);
    // Group g is centred on x = g * GROUP; its bars share 80 % of the slot.
    let x_range = -GROUP / 2..groups.len() as i32 * GROUP - GROUP / 2;
    let group_centres: Vec<i32> = (0..groups.len() as i32).map(|g| g * GROUP).collect();
    let group_label = |x: &i32| {
        let index = ((*x + GROUP / 2).max(0) / GROUP) as usize;
        groups
            .get(index)
            .map_or_else(String::new, |g| g.to_string())
    };

    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{scenario}: throughput relative to native"),
            (FONT, 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(
            x_range.clone().with_key_points(group_centres),
            lowest..highest,
        )?;
    let y_label = |y: &f64| scale.label(*y);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 13))
        .x_label_formatter(&group_label)
        .y_label_formatter(&y_label)
        .y_desc(scale.description())
        .draw()?;

    let bar_width = GROUP * 8 / 10 / series.len().max(1) as i32;
    for (k, s) in series.iter().enumerate() {
        let colour = s.colour;
        let bars = s
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(move |(g, &v)| {
                let left = g as i32 * GROUP - GROUP * 4 / 10 + k as i32 * bar_width;
                // A 10 % gap between neighbouring bars keeps similar colours apart.
                Rectangle::new(
                    [(left, lowest), (left + bar_width * 9 / 10, scale.y(v))],
                    colour.filled(),
                )
            });
        chart
            .draw_series(bars)?
            .label(s.name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    chart
        .draw_series(DashedLineSeries::new(
            [(x_range.start, scale.y(1.0)), (x_range.end, scale.y(1.0))],
            6,
            4,
            BLACK.stroke_width(1),
        ))?
        .label("native = 1.0")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 12, y)], BLACK));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()?;
    Ok(())
}

/// The relative-throughput axis: linear from 0, or logarithmic when the
/// bars span more than [`LOG_SPAN`]× (a 30× bar would flatten every bar
/// near 1 into the axis). On a log axis bars are drawn as log10 of their
/// value, and the labels show the values.
#[derive(Clone, Copy, Debug, PartialEq)]
enum YScale {
    Linear,
    Log,
}

/// Largest ratio between the tallest and the shortest bar on a linear axis.
const LOG_SPAN: f64 = 30.0;

impl YScale {
    fn for_values(values: &[f64]) -> YScale {
        let positive = values.iter().copied().filter(|v| *v > 0.0);
        let (lo, hi) = positive.fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        if hi > 0.0 && hi / lo > LOG_SPAN {
            YScale::Log
        } else {
            YScale::Linear
        }
    }

    /// Where value `v` is drawn.
    fn y(self, v: f64) -> f64 {
        match self {
            YScale::Linear => v,
            YScale::Log => v.max(1e-9).log10(),
        }
    }

    /// The axis range, in drawn units, with 1.0 always inside.
    fn range(self, values: &[f64]) -> (f64, f64) {
        match self {
            YScale::Linear => {
                let (lo, hi) = values
                    .iter()
                    .fold((0.0_f64, 1.0_f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
                (lo, hi * 1.3)
            }
            YScale::Log => {
                let (lo, hi) = values
                    .iter()
                    .filter(|v| **v > 0.0)
                    .fold((1.0_f64, 1.0_f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
                // Whole decades below, and room for the legend above.
                (lo.log10().floor(), hi.log10() + 1.0)
            }
        }
    }

    /// The value a grid line at drawn height `y` stands for.
    fn label(self, y: f64) -> String {
        match self {
            YScale::Linear => format!("{y:.1}"),
            YScale::Log => {
                let v = 10f64.powf(y);
                if v >= 10.0 {
                    format!("{v:.0}")
                } else if v >= 1.0 {
                    format!("{v:.1}")
                } else {
                    format!("{v:.2}")
                }
            }
        }
    }

    fn description(self) -> &'static str {
        match self {
            YScale::Linear => "relative throughput (× native)",
            YScale::Log => "relative throughput (× native, log scale)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::{poisoned_report, sample_report};

    #[test]
    fn a_long_legend_wraps_and_the_warm_up_is_shaded_and_named() {
        let labels: Vec<String> = (0..12).map(|i| format!("emulated-unit-{i}")).collect();
        let rows = legend_rows(&labels);
        assert!(rows.len() > 1, "{rows:?}");
        for row in &rows {
            let &(last, x) = row.last().unwrap();
            assert!(
                x + 8 * labels[last].len() as i32 <= TIMELINE_WIDTH as i32,
                "{row:?}"
            );
        }
        assert_eq!(rows.iter().map(Vec::len).sum::<usize>(), labels.len());
        let report = sample_report();
        let plain = render_timeline_svg(&report).unwrap();
        let shaded = render_timeline_svg_with_warmup(&report, Some(0.5)).unwrap();
        assert!(!plain.contains(WARMUP_LABEL));
        assert!(shaded.contains(WARMUP_LABEL));
    }

    #[test]
    fn bars_spanning_thirty_times_get_a_log_axis_with_one_inside() {
        assert_eq!(YScale::for_values(&[0.5, 1.0, 12.0]), YScale::Linear);
        let values = [0.3, 1.0, 32.0];
        let log = YScale::for_values(&values);
        assert_eq!(log, YScale::Log);
        let (lo, hi) = log.range(&values);
        assert!(lo <= log.y(0.3) && hi > log.y(32.0) && lo < log.y(1.0));
        assert_eq!(log.label(log.y(20.0)), "20");
        assert_eq!(log.label(log.y(3.16)), "3.2");
        assert_eq!(log.label(log.y(0.5)), "0.50");
        assert_eq!(YScale::Linear.range(&[0.5, 2.0]), (0.0, 2.6));
    }
    use std::collections::BTreeMap;

    /// plotters writes each label as `<text ...>\nLABEL\n</text>`.
    fn has_text(svg: &str, label: &str) -> bool {
        svg.contains(&format!(">\n{label}\n</text>"))
    }

    /// The most 6-px horizontal dashes sharing one pixel row: plotters draws
    /// a dashed line as separate `<polyline points="x0,y x1,y "/>` dashes.
    fn longest_dashed_row(svg: &str) -> usize {
        let mut per_row: BTreeMap<i32, usize> = BTreeMap::new();
        for points in svg.split("points=\"").skip(1) {
            let coords: Vec<i32> = points
                .split('"')
                .next()
                .unwrap()
                .split([',', ' '])
                .filter(|c| !c.is_empty())
                .map(|c| c.parse().unwrap())
                .collect();
            if let [x0, y0, x1, y1] = coords[..] {
                if y0 == y1 && x1 - x0 == 6 {
                    *per_row.entry(y0).or_default() += 1;
                }
            }
        }
        per_row.into_values().max().unwrap_or(0)
    }

    fn assert_is_svg(svg: &str) {
        assert!(
            svg.trim_start().starts_with("<svg"),
            "{}",
            &svg[..svg.len().min(200)]
        );
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn timeline_has_a_panel_per_policy_lanes_and_unit_legend() {
        let svg = render_timeline_svg(&sample_report()).unwrap();
        assert_is_svg(&svg);
        // Names are XML-escaped by the backend.
        for text in [
            "native",
            "hetsched",
            "bfs",
            "mm, &quot;big&quot;",
            "kmeans",
            "cpu",
            "gpu",
        ] {
            assert!(has_text(&svg, text), "missing {text}");
        }
        assert!(svg.contains("time (s)"));
        // One legend swatch per unit, then one bar per segment: cpu (orange)
        // has 2 + 2 segments, gpu (sky blue) 1 + 2.
        let orange = svg.matches("fill=\"#E69F00\"").count();
        let blue = svg.matches("fill=\"#56B4E9\"").count();
        assert_eq!(
            (orange, blue),
            (1 + 4, 1 + 3),
            "legend swatch + bars per unit"
        );
    }

    #[test]
    fn relative_has_groups_series_and_native_line() {
        let svg = render_relative_svg(&sample_report()).unwrap();
        assert_is_svg(&svg);
        for text in [
            "bfs",
            "mm, &quot;big&quot;",
            "kmeans",
            "geomean",
            "native",
            "hetsched",
            "oracle",
            "native = 1.0",
        ] {
            assert!(has_text(&svg, text), "missing {text}");
        }
        assert!(longest_dashed_row(&svg) >= 20, "no dashed native line");
    }

    #[test]
    fn non_finite_values_are_skipped_not_fatal() {
        let report = poisoned_report();
        assert_is_svg(&render_timeline_svg(&report).unwrap());
        let svg = render_relative_svg(&report).unwrap();
        assert_is_svg(&svg);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn empty_timeline_and_single_policy_still_render() {
        let mut report = sample_report();
        report.results.truncate(1);
        report.results[0].timeline.clear();
        let svg = render_timeline_svg(&report).unwrap();
        assert_is_svg(&svg);
        assert!(svg.contains("no timeline recorded"));
        assert_is_svg(&render_relative_svg(&report).unwrap());

        report.results.clear();
        report.apps.clear();
        report.oracle_apps.clear();
        assert_is_svg(&render_timeline_svg(&report).unwrap());
        assert_is_svg(&render_relative_svg(&report).unwrap());
    }
}
