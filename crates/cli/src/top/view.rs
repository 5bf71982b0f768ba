//! Drawing a [`Screen`] with ratatui.

use super::model::{Screen, SortBy, bar};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table};

/// Which table gets the room that is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Focus {
    Clients,
    Units,
}

impl Focus {
    pub fn toggled(self) -> Focus {
        match self {
            Focus::Clients => Focus::Units,
            Focus::Units => Focus::Clients,
        }
    }
}

const BAR_CELLS: usize = 20;

pub fn draw(f: &mut Frame, s: &Screen, status: &str, sort: SortBy, focus: Focus) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let units_height = match focus {
        Focus::Units => Constraint::Min(3),
        Focus::Clients => Constraint::Length(s.units.len() as u16 + 3),
    };
    let clients_height = match focus {
        Focus::Units => Constraint::Length(6),
        Focus::Clients => Constraint::Min(3),
    };
    let coord_height = if s.coordination.is_empty() {
        0
    } else {
        (s.coordination.len() as u16 + 2).min(8)
    };
    let [header, units, clients, coord, footer] = Layout::vertical([
        Constraint::Length(1),
        units_height,
        clients_height,
        Constraint::Length(coord_height),
        Constraint::Length(1),
    ])
    .areas(f.area());

    f.render_widget(Paragraph::new(s.header.as_str()).style(bold), header);

    let unit_rows = s.units.iter().map(|u| {
        Row::new(vec![
            u.name.clone(),
            u.class.to_string(),
            u.policy.to_string(),
            format!(
                "{} {:>5.1}%",
                bar(u.utilization, BAR_CELLS),
                100.0 * u.utilization
            ),
            u.queued.to_string(),
            u.running.to_string(),
            u.active.to_string(),
        ])
    });
    // Columns as wide as their contents (the spare width stays at the
    // right), so that a long terminal does not pad names out.
    let unit_table = Table::new(
        unit_rows,
        [
            fit("UNIT", s.units.iter().map(|u| u.name.as_str())),
            fit("CLASS", s.units.iter().map(|u| u.class)),
            fit("POLICY", s.units.iter().map(|u| u.policy)),
            Constraint::Length(BAR_CELLS as u16 + 8),
            Constraint::Length(7),
            Constraint::Length(8),
            Constraint::Length(7),
        ],
    )
    .header(
        Row::new([
            "UNIT",
            "CLASS",
            "POLICY",
            "UTILIZATION",
            "QUEUED",
            "RUNNING",
            "ACTIVE",
        ])
        .style(bold),
    )
    .block(Block::bordered().title(" units "));
    f.render_widget(unit_table, units);

    let client_rows = s.clients.iter().map(|c| {
        Row::new(vec![
            c.id.to_string(),
            c.pid.to_string(),
            c.name.clone(),
            c.unit.clone(),
            c.class.clone(),
            format!("{:>5.1}%", 100.0 * c.achieved),
            format!("{:>7.1}", 1e3 * c.rate),
            c.outstanding.to_string(),
        ])
    });
    let client_table = Table::new(
        client_rows,
        [
            fit("CLIENT", s.clients.iter().map(|c| c.id.to_string())),
            fit("PID", s.clients.iter().map(|c| c.pid.to_string())),
            fit("NAME", s.clients.iter().map(|c| c.name.as_str())),
            fit("UNIT", s.clients.iter().map(|c| c.unit.as_str())),
            fit("CLASS", s.clients.iter().map(|c| c.class.as_str())),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(6),
        ],
    )
    .header(
        Row::new([
            "CLIENT", "PID", "NAME", "UNIT", "CLASS", "ACHIEVED", "MS/S", "OUTST",
        ])
        .style(bold),
    )
    .block(Block::bordered().title(format!(
        " clients ({}, by {}) ",
        s.clients.len(),
        sort.label()
    )));
    f.render_widget(client_table, clients);

    if coord_height > 0 {
        let lines: Vec<Line> = s
            .coordination
            .iter()
            .map(|l| Line::from(l.as_str()))
            .collect();
        f.render_widget(
            Paragraph::new(lines).block(Block::bordered().title(" coordination ")),
            coord,
        );
    }
    f.render_widget(
        Paragraph::new(format!(
            "q quit   s sort ({})   u units/clients   {status}",
            sort.label()
        )),
        footer,
    );
}

/// A column as wide as the widest of its header and cells (in terminal
/// cells), at most [`MAX_COLUMN`].
fn fit<T: AsRef<str>>(header: &str, cells: impl Iterator<Item = T>) -> Constraint {
    let width = |t: &str| ratatui::text::Span::raw(t).width();
    let widest = cells
        .map(|c| width(c.as_ref()))
        .fold(width(header), usize::max);
    Constraint::Length(widest.min(MAX_COLUMN) as u16)
}

/// The widest a text column grows; longer names are cut.
const MAX_COLUMN: usize = 40;
