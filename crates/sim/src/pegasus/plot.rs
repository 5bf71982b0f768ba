//! Relative throughput per domain and policy, as grouped bars.

use super::PegasusReport;
use plotters::prelude::*;

pub fn relative_svg(r: &PegasusReport) -> std::io::Result<String> {
    let mut svg = String::new();
    draw(r, &mut svg).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(svg)
}

fn draw(r: &PegasusReport, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let groups = r.apps.len() + 1;
    let per = r.results.len();
    let width = (160 + groups * per * 14).clamp(640, 2400) as u32;
    let root = SVGBackend::with_string(out, (width, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let top = r
        .results
        .iter()
        .flat_map(|x| {
            x.apps
                .values()
                .map(|a| a.relative)
                .chain([x.system_speedup])
        })
        .filter(|v| v.is_finite())
        .fold(1.0f64, f64::max);
    let slot = per as i32 + 1;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{}: throughput relative to policy none", r.scenario),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(52)
        .build_cartesian_2d(
            (0..groups as i32 * slot).with_key_points(
                (0..groups as i32)
                    .map(|g| g * slot + per as i32 / 2)
                    .collect(),
            ),
            // Headroom above the bars for the legend (one row per policy).
            0.0..top * 1.7,
        )?;
    let names: Vec<String> = r
        .apps
        .iter()
        .cloned()
        .chain(["geomean".to_string()])
        .collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&|x| names.get((*x / slot) as usize).cloned().unwrap_or_default())
        .y_desc("× none")
        .draw()?;
    for (k, res) in r.results.iter().enumerate() {
        let colour = Palette99::pick(k).to_rgba();
        let values: Vec<f64> = r
            .apps
            .iter()
            .map(|a| res.apps[a].relative)
            .chain([res.system_speedup])
            .collect();
        chart
            .draw_series(values.into_iter().enumerate().map(move |(g, v)| {
                let x = g as i32 * slot + k as i32;
                Rectangle::new([(x, 0.0), (x + 1, v)], colour.filled())
            }))?
            .label(res.policy.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
