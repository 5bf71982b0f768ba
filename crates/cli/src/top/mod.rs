//! `hetsched top`: a live view of a running daemon (units with their
//! utilisation, queues and clients, the clients with their class and what
//! they get, coordination), refreshed every `--interval` seconds.
//! Keys: `q` (or Esc, Ctrl-C) quits, `s` changes the client order, `u`
//! gives the units or the clients the room.

mod model;
mod view;

use crate::admin::SocketArg;
use anyhow::{Context, Result};
use clap::Args;
use hetsched_protocol::{Client, StatusReport};
use model::SortBy;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use std::time::{Duration, Instant};
use view::Focus;

#[derive(Args)]
pub struct TopArgs {
    #[command(flatten)]
    socket: SocketArg,
    /// Seconds between refreshes (0.1 to 60).
    #[arg(long, default_value = "1", value_parser = parse_refresh)]
    interval: Duration,
}

fn parse_refresh(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.1..=60.0).contains(&v) {
        return Err(format!("{s} s: the interval is 0.1 to 60 seconds"));
    }
    Ok(Duration::from_secs_f64(v))
}

/// What the loop keeps between refreshes.
struct Live {
    client: Option<Client>,
    last: Option<(StatusReport, Instant)>,
    previous: Option<(StatusReport, Instant)>,
    /// Why the last refresh failed, shown in the footer.
    trouble: Option<String>,
}

impl Live {
    fn refresh(&mut self, socket: &SocketArg) {
        if self.client.is_none() {
            match socket.observer("hetsched-top") {
                Ok(c) => self.client = Some(c),
                Err(e) => {
                    self.trouble = Some(e.to_string());
                    return;
                }
            }
        }
        let Some(client) = self.client.as_mut() else {
            return;
        };
        match client.status() {
            Ok(report) => {
                self.previous = self.last.take();
                self.last = Some((report, Instant::now()));
                self.trouble = None;
            }
            Err(e) => {
                // Reconnect at the next refresh (the daemon may restart).
                self.client = None;
                self.trouble = Some(format!("lost the daemon: {e}"));
            }
        }
    }
}

pub fn run(args: TopArgs) -> Result<()> {
    // Fails before the screen is taken over when no daemon answers.
    let first = args.socket.observer("hetsched-top")?;
    let mut live = Live {
        client: Some(first),
        last: None,
        previous: None,
        trouble: None,
    };
    live.refresh(&args.socket);
    // A screen to take over: without one (a pipe, a file, a service)
    // there is nothing to draw on.
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "hetsched top needs a terminal, and its output is not one; \
             for a report to a pipe or a file use `hetsched status` (--json, --format csv)"
        );
    }
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            ratatui::restore();
            return Err(e).context("hetsched top cannot take over the terminal");
        }
    };
    let result = run_loop(&mut terminal, &args, &mut live);
    ratatui::restore();
    result
}

fn run_loop(
    terminal: &mut ratatui::DefaultTerminal,
    args: &TopArgs,
    live: &mut Live,
) -> Result<()> {
    let mut sort = SortBy::Use;
    let mut focus = Focus::Clients;
    let mut next_refresh = Instant::now() + args.interval;
    loop {
        terminal.draw(|f| {
            let status = live.trouble.clone().unwrap_or_default();
            match &live.last {
                Some((now, at)) => {
                    let before = live.previous.as_ref();
                    let elapsed = before.map_or(0.0, |(_, b)| at.duration_since(*b).as_secs_f64());
                    let screen = model::screen(now, before.map(|(r, _)| r), elapsed, sort);
                    view::draw(f, &screen, &status, sort, focus);
                }
                None => f.render_widget(
                    ratatui::widgets::Paragraph::new(format!("waiting for the daemon… {status}")),
                    f.area(),
                ),
            }
        })?;
        let wait = next_refresh.saturating_duration_since(Instant::now());
        if event::poll(wait)? {
            if let Event::Key(k) = event::read()?
                && k.kind == KeyEventKind::Press
            {
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        return Ok(());
                    }
                    KeyCode::Char('s') => sort = sort.next(),
                    KeyCode::Char('u') => focus = focus.toggled(),
                    _ => {}
                }
            }
            continue;
        }
        live.refresh(&args.socket);
        next_refresh = Instant::now() + args.interval;
    }
}
