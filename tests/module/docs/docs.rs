//! The documentation, replayed: every example session of the README and of
//! `docs/commands/*.md` runs against a server with the module, every reply
//! is compared with the one printed, and every error of every error table is
//! triggered by its example call and compared word for word. The client
//! examples in `examples/` are run by `tests/module/docs/examples.rs`.
//!
//! How the pages are read:
//!
//! - A fenced block without a language whose first line starts with `> `
//!   (or `$ redis-cli `) is a session: `> COMMAND args` lines, each followed
//!   by its reply as `redis-cli` prints it (`(integer) 1`, `1) (integer) 0`,
//!   `"text"`, `(nil)`, `OK`, `(error) ERR ...`). A `#` after a space starts
//!   a comment. A word `<1,025 bytes>` stands for that many bytes.
//! - A session starts on an empty server with the clock at [`T0`]
//!   (2023-11-14T22:13:20Z), or at the instant of a `<!-- clock:
//!   2026-03-01T10:00:00Z -->` comment before it. `<!-- continues -->`, or
//!   `<!-- continues 10ms later -->`, before a block continues the previous
//!   session (its keys and its clock, moved on).
//! - `<!-- not replayed: reason -->` before a block says why it cannot be
//!   replayed; blocks with a language (`sh`, `python`, `text`) are code, not
//!   sessions; a block starting with the page's command is its syntax.
//!   Anything else is an error, so that nothing is skipped silently.
//! - An error table has the header `| condition | example | reply |`. Each
//!   row whose reply is an error (`ERR ...`, `WRONGTYPE ...`) runs on an
//!   empty server at [`T0`]: the commands of its example cell in order, the
//!   last of which must answer that error and change nothing (`DEBUG
//!   DIGEST`); the ones before it set the scene. Rows without an error
//!   reply refer to another page ("as `CL.THROTTLE`").

use crate::support::*;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Session blocks marked `not replayed`, all pages together: a new one needs
/// this count raised, deliberately.
const NOT_REPLAYED: usize = 1;

/// The HTML comments this test reads; other comments are left alone.
const DIRECTIVES: &[&str] = &["clock:", "continues", "not replayed"];

/// Command pages without an example session: what they take is a
/// serialized payload, shown in their error tables.
const NO_SESSION: &[&str] = &["docs/commands/cc.load.md", "docs/commands/sw.load.md"];

/// Errors of `src/error.rs` no call on this test's single server can
/// trigger from an empty start: an internal error; a replica's refusal and
/// the 10,001st policy (both in tests/module/policies/policies.rs, and stated on the
/// cl.policy.md page below its table).
const UNREACHABLE: &[&str] = &[
    "ERR internal error in redis-cell; the command was not applied",
    "READONLY You can't write against a read only replica.",
    "ERR too many policies: at most 10000; delete one first",
];

#[test]
fn every_example_and_every_documented_error_is_what_the_server_answers() {
    let pages = pages();
    // With the opt-in GCRA command, so that its page replays too.
    let s = Server::with(Options {
        module_args: vec!["gcra-command".into(), "yes".into()],
        ..Options::default()
    });
    let c = &mut s.conn();
    let mut failures = Vec::new();
    let mut counts = Counts::default();
    let mut triggered = std::collections::BTreeSet::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let name = page
            .strip_prefix(root!())
            .unwrap_or(page)
            .display()
            .to_string();
        let doc = read_page(&name, &text, &mut failures);
        for block in &doc.blocks {
            match &block.kind {
                Kind::Session(session) => {
                    counts.sessions += 1;
                    counts.commands += session.len();
                    replay(&s, c, &name, block, session, 0, &mut failures);
                }
                Kind::NotReplayed(reason) => counts
                    .not_replayed
                    .push(format!("{name}:{}: {reason}", block.line)),
                Kind::Syntax => counts.syntax += 1,
                Kind::Code(lang) => *counts.code.entry(lang.clone()).or_default() += 1,
            }
        }
        if name.starts_with("docs/commands/") {
            if doc.errors.is_empty() {
                failures.push(format!(
                    "{name}: no error table (`| condition | example | reply |`)"
                ));
            }
            let sessions = doc
                .blocks
                .iter()
                .filter(|b| matches!(b.kind, Kind::Session(_)))
                .count();
            if sessions == 0 && !NO_SESSION.contains(&name.as_str()) {
                failures.push(format!("{name}: no example session"));
            }
        }
        for row in &doc.errors {
            counts.errors += 1;
            triggered.insert(row.reply.clone());
            trigger(&s, c, &name, row, &mut failures);
        }
        counts.references += doc.references;
    }
    for text in error_texts() {
        if !triggered.contains(&text) && !UNREACHABLE.contains(&text.as_str()) {
            failures.push(format!("src/error.rs: `{text}` is in no error table"));
        }
    }
    eprintln!(
        "{} pages: {} sessions ({} commands) replayed, {} documented errors triggered, \
         {} rows referring to another page, {} syntax blocks, code blocks {:?}, \
         not replayed: {:?}",
        pages.len(),
        counts.sessions,
        counts.commands,
        counts.errors,
        counts.references,
        counts.syntax,
        counts.code,
        counts.not_replayed
    );
    assert!(
        failures.is_empty(),
        "{} of the documentation's examples and errors differ from the server ({:?}):\n\n{}",
        failures.len(),
        server_version(),
        failures.join("\n\n")
    );
    assert_eq!(
        counts.not_replayed.len(),
        NOT_REPLAYED,
        "blocks not replayed: {:?}",
        counts.not_replayed
    );
    assert!(counts.sessions > 30 && counts.errors > 100, "{counts:?}");
}

/// How long a person takes to type the next command of a walk-through.
const TYPING: i64 = 1_500_000_000;

/// The README's sessions are walk-throughs that people type: each one,
/// replayed with [`TYPING`] between commands (and before a block that
/// continues another), still answers what is printed.
#[test]
fn the_readmes_sessions_answer_the_same_when_typed_by_hand() {
    let s = Server::start();
    let c = &mut s.conn();
    let mut failures = Vec::new();
    let mut sessions = 0;
    let name = "README.md";
    let text = std::fs::read_to_string(Path::new(root!()).join(name)).unwrap();
    for block in &read_page(name, &text, &mut failures).blocks {
        if let Kind::Session(session) = &block.kind {
            sessions += 1;
            replay(&s, c, name, block, session, TYPING, &mut failures);
        }
    }
    assert!(sessions > 10, "{sessions} sessions in README.md");
    assert!(
        failures.is_empty(),
        "{} of README.md's examples answer otherwise when typed {} s apart:\n\n{}",
        failures.len(),
        TYPING as f64 / 1e9,
        failures.join("\n\n")
    );
}

/// The fixed error texts of `src/error.rs` (`CmdError::Reply("...")`).
fn error_texts() -> Vec<String> {
    let source = std::fs::read_to_string(concat!(root!(), "/src/error.rs")).expect("src/error.rs");
    source
        .split("CmdError::Reply(")
        .skip(1)
        .filter_map(|rest| {
            let rest = rest.trim_start().strip_prefix('"')?;
            Some(rest[..rest.find('"')?].to_string())
        })
        .collect()
}

fn pages() -> Vec<PathBuf> {
    let root = Path::new(root!());
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs/commands"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.insert(0, root.join("README.md"));
    pages
}

#[derive(Default, Debug)]
struct Counts {
    sessions: usize,
    commands: usize,
    errors: usize,
    references: usize,
    syntax: usize,
    code: std::collections::BTreeMap<String, usize>,
    not_replayed: Vec<String>,
}

/// What a page holds.
struct Page {
    blocks: Vec<Block>,
    errors: Vec<ErrorRow>,
    /// Error-table rows that refer to another page.
    references: usize,
}

struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    kind: Kind,
    /// Where the clock stands and whether the keys are kept.
    start: Start,
}

enum Kind {
    Session(Vec<Step>),
    NotReplayed(String),
    Syntax,
    Code(String),
}

#[derive(Clone, Copy)]
enum Start {
    /// An empty server at this instant (ns).
    At(i64),
    /// The previous session's server, this much later (ns).
    Continues(i64),
}

struct Step {
    line: usize,
    words: Vec<Vec<u8>>,
    /// The command as printed (comment removed).
    text: String,
    /// The reply as printed, one line each (comments removed).
    reply: Vec<String>,
}

struct ErrorRow {
    line: usize,
    /// Setup commands, then the one that must fail.
    calls: Vec<String>,
    reply: String,
}

fn read_page(name: &str, text: &str, failures: &mut Vec<String>) -> Page {
    let command = Path::new(name)
        .file_stem()
        .filter(|_| name.starts_with("docs/commands/"))
        .map(|s| s.to_string_lossy().to_uppercase());
    let lines: Vec<&str> = text.lines().collect();
    let mut page = Page {
        blocks: Vec::new(),
        errors: Vec::new(),
        references: 0,
    };
    let mut directive: Option<(usize, String)> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(comment) = line
            .trim()
            .strip_prefix("<!--")
            .and_then(|l| l.strip_suffix("-->"))
            .map(str::trim)
            .filter(|c| DIRECTIVES.iter().any(|d| c.starts_with(d)))
        {
            directive = Some((i + 1, comment.to_string()));
            i += 1;
            continue;
        }
        if let Some(lang) = line.strip_prefix("```") {
            let start = i + 1;
            let mut end = start;
            while end < lines.len() && !lines[end].starts_with("```") {
                end += 1;
            }
            let body = &lines[start..end.min(lines.len())];
            let block = read_block(
                name,
                start,
                lang.trim(),
                body,
                command.as_deref(),
                directive.take(),
            );
            match block {
                Ok(b) => page.blocks.push(b),
                Err(e) => failures.push(format!("{name}:{start}: {e}")),
            }
            i = end + 1;
            continue;
        }
        if is_error_header(line) {
            i += 1;
            // The separator row.
            if lines
                .get(i)
                .is_some_and(|l| l.starts_with("|-") || l.starts_with("| -"))
            {
                i += 1;
            }
            while let Some(row) = lines.get(i).filter(|l| l.starts_with('|')) {
                match error_row(i + 1, row) {
                    Ok(Some(r)) => page.errors.push(r),
                    Ok(None) => page.references += 1,
                    Err(e) => failures.push(format!("{name}:{}: {e}", i + 1)),
                }
                i += 1;
            }
            continue;
        }
        if !line.trim().is_empty() {
            if let Some((at, d)) = directive.take() {
                failures.push(format!(
                    "{name}:{at}: `<!-- {d} -->` is not followed by a block"
                ));
            }
        }
        i += 1;
    }
    page
}

fn is_error_header(line: &str) -> bool {
    let cells: Vec<String> = cells(line).iter().map(|c| c.to_lowercase()).collect();
    cells == ["condition", "example", "reply"]
}

/// The cells of a table row, not splitting inside code spans.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = vec![String::new()];
    let mut code = false;
    for ch in inner.chars() {
        match ch {
            '`' => {
                code = !code;
                cells.last_mut().unwrap().push(ch);
            }
            '|' if !code => cells.push(String::new()),
            _ => cells.last_mut().unwrap().push(ch),
        }
    }
    // A `|` inside a table cell is written `\|` (GitHub's tables), code
    // spans included.
    cells.iter().map(|c| c.trim().replace("\\|", "|")).collect()
}

/// The code spans of a cell.
fn spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_string())
        .collect()
}

/// Whether a code span is an error reply: an upper-case code, a space, a
/// text (`ERR ...`, `WRONGTYPE ...`).
fn is_error_text(span: &str) -> bool {
    let code = span.split(' ').next().unwrap_or_default();
    span.len() > code.len() && !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase())
}

fn error_row(line: usize, row: &str) -> Result<Option<ErrorRow>, String> {
    let cells = cells(row);
    let [_, example, reply] = cells.as_slice() else {
        return Err(format!("an error-table row needs three cells: {row}"));
    };
    let Some(reply) = spans(reply).into_iter().find(|s| is_error_text(s)) else {
        return Ok(None);
    };
    let calls = spans(example);
    if calls.is_empty() {
        return Err(format!("`{reply}` has no example call"));
    }
    Ok(Some(ErrorRow { line, calls, reply }))
}

fn read_block(
    name: &str,
    line: usize,
    lang: &str,
    body: &[&str],
    command: Option<&str>,
    directive: Option<(usize, String)>,
) -> Result<Block, String> {
    let mut start = Start::At(T0);
    let mut not_replayed = None;
    if let Some((_, d)) = &directive {
        if let Some(reason) = d.strip_prefix("not replayed:") {
            not_replayed = Some(reason.trim().to_string());
        } else if let Some(at) = d.strip_prefix("clock:") {
            start = Start::At(instant(at.trim())?);
        } else if d == "continues" {
            start = Start::Continues(0);
        } else if let Some(later) = d
            .strip_prefix("continues ")
            .and_then(|l| l.strip_suffix(" later"))
        {
            start = Start::Continues(duration(later.trim())?);
        } else {
            return Err(format!("unknown directive `<!-- {d} -->`"));
        }
    }
    let first = body
        .iter()
        .find(|l| !l.trim().is_empty())
        .copied()
        .unwrap_or("");
    let session = lang.is_empty() && (first.starts_with("> ") || first.starts_with("$ redis-cli "));
    let kind = if let Some(reason) = not_replayed {
        if reason.is_empty() {
            return Err("`not replayed` needs a reason".into());
        }
        Kind::NotReplayed(reason)
    } else if !lang.is_empty() {
        Kind::Code(lang.to_string())
    } else if session {
        Kind::Session(steps(line, body)?)
    } else if command.is_some_and(|c| first.split_whitespace().next() == Some(c)) {
        Kind::Syntax
    } else {
        return Err(format!(
            "a block that is neither a session, nor the page's syntax, nor code with a language, \
             nor marked `<!-- not replayed: reason -->` (in {name})"
        ));
    };
    Ok(Block { line, kind, start })
}

fn steps(line: usize, body: &[&str]) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    for (n, raw) in body.iter().enumerate() {
        let text = strip_comment(raw);
        let command = text
            .strip_prefix("> ")
            .or_else(|| text.strip_prefix("$ redis-cli "));
        match command {
            Some(command) => steps.push(Step {
                line: line + 1 + n,
                words: words(command)?,
                text: command.trim().to_string(),
                reply: Vec::new(),
            }),
            None if text.trim().is_empty() => {}
            None => match steps.last_mut() {
                Some(step) => step.reply.push(text.trim_end().to_string()),
                None => return Err(format!("a reply before any command: {raw}")),
            },
        }
    }
    Ok(steps)
}

/// A line without its `# comment` (a `#` after a space, outside quotes).
fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    let mut prev = ' ';
    for (i, ch) in line.char_indices() {
        match ch {
            '"' if prev != '\\' => quoted = !quoted,
            '#' if !quoted && prev.is_whitespace() && i > 0 => return line[..i].trim_end(),
            _ => {}
        }
        prev = ch;
    }
    line.trim_end()
}

/// The words of a command line, as `redis-cli` splits them: double quotes
/// with `\"`, `\\`, `\n` and `\xHH` escapes; and `<1,025 bytes>` for that
/// many bytes.
fn words(line: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut words = Vec::new();
    let mut chars = line.trim().chars().peekable();
    while let Some(&ch) = chars.peek() {
        if ch.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = Vec::new();
        if ch == '"' {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(format!("unclosed quote in {line}")),
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some('n') => word.push(b'\n'),
                        Some('x') => {
                            let hex: String = chars.by_ref().take(2).collect();
                            let b = u8::from_str_radix(&hex, 16)
                                .map_err(|_| format!("bad \\x escape in {line}"))?;
                            word.push(b);
                        }
                        Some(c) => word.extend(c.to_string().bytes()),
                        None => return Err(format!("dangling escape in {line}")),
                    },
                    Some(c) => word.extend(c.to_string().bytes()),
                }
            }
        } else if ch == '<' {
            let spec: String = chars.by_ref().take_while(|&c| c != '>').collect();
            let n = spec
                .trim_start_matches('<')
                .strip_suffix(" bytes")
                .map(|n| n.replace(',', ""))
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| format!("expected `<N bytes>` in {line}"))?;
            word = vec![b'x'; n];
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                word.extend(c.to_string().bytes());
                chars.next();
            }
        }
        words.push(word);
    }
    if words.is_empty() {
        return Err("an empty command".into());
    }
    Ok(words)
}

/// `2026-03-01T10:00:00Z` (or with fractional seconds) in ns since the epoch.
fn instant(text: &str) -> Result<i64, String> {
    let bad = || format!("expected an instant like 2026-03-01T10:00:00Z, got {text}");
    let t = text.strip_suffix('Z').ok_or_else(bad)?;
    let (date, time) = t.split_once('T').ok_or_else(bad)?;
    let d: Vec<i64> = date
        .split('-')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let h: Vec<i64> = hms
        .split(':')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let ([y, m, day], [hh, mm, ss]) = (d.as_slice(), h.as_slice()) else {
        return Err(bad());
    };
    // Days since the epoch of a proleptic Gregorian date (Howard Hinnant's
    // days_from_civil).
    let y = if *m <= 2 { y - 1 } else { *y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let nanos = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse::<i64>().map_err(|_| bad())?
    };
    Ok(((days * 86_400 + hh * 3_600 + mm * 60 + ss) * SEC) + nanos)
}

/// `10ms`, `30s`, `5m`, `2h`, `1d` in ns.
fn duration(text: &str) -> Result<i64, String> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let n: i64 = digits
        .parse()
        .map_err(|_| format!("expected a duration like 30s, got {text}"))?;
    let unit = match &text[digits.len()..] {
        "ms" => MS,
        "s" => SEC,
        "m" => 60 * SEC,
        "h" => 3_600 * SEC,
        "d" => 86_400 * SEC,
        _ => return Err(format!("expected a duration like 30s, got {text}")),
    };
    Ok(n * unit)
}

// The clock of the session being replayed, kept across `continues`; one
// per thread, as the tests of this file replay on their own servers at once.
thread_local! {
    static NOW: std::cell::Cell<i64> = const { std::cell::Cell::new(T0) };
    /// The instant the session (with the blocks continuing it) began.
    static BEGAN: std::cell::Cell<i64> = const { std::cell::Cell::new(T0) };
}

fn set_clock(s: &Server, nanos: i64) {
    NOW.set(nanos);
    s.set_time(nanos);
    // Valkey 9 takes up to a millisecond to see a clock step.
    std::thread::sleep(std::time::Duration::from_millis(3));
}

fn fresh(s: &Server, c: &mut redis::Connection, at: i64) {
    // Rows that show a write refused set these.
    cmd(c, "CONFIG SET maxmemory 0").unwrap();
    cmd(c, "CONFIG SET min-replicas-to-write 0").unwrap();
    cmd(c, "FLUSHALL").unwrap();
    // Policies and the top-offender summaries are the server's, not keys:
    // FLUSHALL keeps them.
    if let Ok(Value::Array(names)) = cmd(c, "CL.POLICY LIST") {
        for name in names {
            if let Value::BulkString(name) = name {
                run(c, &[b"CL.POLICY", b"DEL", &name]).unwrap();
            }
        }
    }
    cmd(c, "CL.TOP RESET").unwrap();
    set_clock(s, at);
    BEGAN.set(at);
}

fn replay(
    s: &Server,
    c: &mut redis::Connection,
    name: &str,
    block: &Block,
    session: &[Step],
    pace: i64,
    failures: &mut Vec<String>,
) {
    match block.start {
        Start::At(at) => fresh(s, c, at),
        Start::Continues(later) => set_clock(s, NOW.get() + later),
    }
    for (n, step) in session.iter().enumerate() {
        if pace > 0 && (n > 0 || matches!(block.start, Start::Continues(_))) {
            set_clock(s, NOW.get() + pace);
        }
        let words: Vec<&[u8]> = step.words.iter().map(Vec::as_slice).collect();
        let got = render(&run(c, &words), &step.text);
        let want: Vec<String> = step.reply.clone();
        let typed = pace > 0 && typed_alike(&want, &got, NOW.get() - BEGAN.get(), &step.text);
        if got != want && !typed {
            failures.push(format!(
                "{name}:{}: > {}\n  printed:\n    {}\n  answered:\n    {}",
                step.line,
                step.text,
                want.join("\n    "),
                got.join("\n    ")
            ));
        }
    }
}

/// Whether `got`, answered `elapsed` ns into a session typed by hand, says
/// what `want` (printed for a session at one instant) says: the same
/// lines, except that a limiter's two times (`retry_after`, `reset_after`,
/// lines 4 and 5 of its integers) may have run down by up to the time
/// elapsed, in the reply's unit. `-1` ("no wait") stays `-1`.
fn typed_alike(want: &[String], got: &[String], elapsed: i64, command: &str) -> bool {
    let unit = if command
        .split_whitespace()
        .any(|w| w.eq_ignore_ascii_case("MS"))
    {
        1_000_000
    } else {
        1_000_000_000
    };
    let slack = (elapsed + unit - 1) / unit;
    let int = |line: &str| -> Option<(String, i64)> {
        let (head, n) = line.rsplit_once(" (integer) ")?;
        Some((head.to_string(), n.trim().parse().ok()?))
    };
    want.len() == got.len()
        && want.iter().zip(got).enumerate().all(|(i, (w, g))| {
            w == g
                || (i == 3 || i == 4)
                    && match (int(w), int(g)) {
                        (Some((wh, w)), Some((gh, g))) => {
                            wh == gh && w != -1 && g != -1 && g <= w && g >= w - slack
                        }
                        _ => false,
                    }
        })
}

fn trigger(
    s: &Server,
    c: &mut redis::Connection,
    name: &str,
    row: &ErrorRow,
    failures: &mut Vec<String>,
) {
    fresh(s, c, T0);
    let Some((last, setup)) = row.calls.split_last() else {
        return;
    };
    let mut fail = |what: String| failures.push(format!("{name}:{}: {what}", row.line));
    for call in setup {
        match words(call).map(|w| {
            let w: Vec<&[u8]> = w.iter().map(Vec::as_slice).collect();
            run(c, &w)
        }) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return fail(format!("setup `{call}` failed: {e}")),
            Err(e) => return fail(e),
        }
    }
    let words = match words(last) {
        Ok(w) => w,
        Err(e) => return fail(e),
    };
    let before = digest(c);
    let w: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
    let want = as_server_says(last, &row.reply);
    match run(c, &w) {
        Err(e) if e == want => {}
        Err(e) => fail(format!("`{last}`\n  documented: {want}\n  answered:   {e}")),
        Ok(v) => fail(format!(
            "`{last}`\n  documented: {want}\n  answered:   {v:?}"
        )),
    }
    if digest(c) != before {
        fail(format!("`{last}` failed but changed the data set"));
    }
    ping(c);
}

fn digest(c: &mut redis::Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(c).unwrap()
}

/// A reply as `redis-cli` prints it.
fn render(reply: &Result<Value, String>, line: &str) -> Vec<String> {
    match reply {
        Err(e) => vec![format!("(error) {}", as_printed(line, e))],
        Ok(v) => {
            let mut out = Vec::new();
            render_value(v, "", &mut out);
            out
        }
    }
}

/// An error as the docs print it: before Redis 7.0 the wrong-arity error
/// names the command as sent, and the docs print 7.0's form.
fn as_printed(line: &str, error: &str) -> String {
    let sent = line.split_whitespace().next().unwrap_or_default();
    error.replace(&format!("'{sent}'"), &format!("'{}'", sent.to_lowercase()))
}

fn render_value(v: &Value, indent: &str, out: &mut Vec<String>) {
    match v {
        Value::Array(items) if items.is_empty() => out.push("(empty array)".into()),
        Value::Array(items) => {
            let width = items.len().to_string().len();
            for (i, item) in items.iter().enumerate() {
                let prefix = format!("{:>width$}) ", i + 1);
                let mut lines = Vec::new();
                render_value(item, "", &mut lines);
                let pad = " ".repeat(prefix.len());
                for (j, l) in lines.into_iter().enumerate() {
                    let lead = if j == 0 {
                        format!("{indent}{prefix}")
                    } else {
                        format!("{indent}{pad}")
                    };
                    out.push(format!("{lead}{l}"));
                }
            }
        }
        other => out.push(format!("{indent}{}", scalar(other))),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Nil => "(nil)".into(),
        Value::Int(i) => format!("(integer) {i}"),
        Value::Okay => "OK".into(),
        Value::SimpleString(s) => s.clone(),
        Value::BulkString(b) => {
            let mut s = String::from("\"");
            for &byte in b {
                match byte {
                    b'"' => s.push_str("\\\""),
                    b'\\' => s.push_str("\\\\"),
                    b'\n' => s.push_str("\\n"),
                    0x20..=0x7e => s.push(byte as char),
                    _ => {
                        let _ = write!(s, "\\x{byte:02x}");
                    }
                }
            }
            s.push('"');
            s
        }
        Value::ServerError(e) => format!("(error) {e:?}"),
        other => format!("{other:?}"),
    }
}

#[test]
fn the_conventions_read_as_documented() {
    assert_eq!(instant("2023-11-14T22:13:20Z"), Ok(T0));
    assert_eq!(instant("2023-11-14T22:13:20.5Z"), Ok(T0 + 500 * MS));
    assert_eq!(instant("1970-01-01T00:00:00Z"), Ok(0));
    assert_eq!(instant("2024-03-01T00:00:00Z"), Ok(1_709_251_200 * SEC));
    assert!(instant("2024-03-01 00:00:00").is_err());
    assert_eq!(duration("10ms"), Ok(10 * MS));
    assert_eq!(duration("2h"), Ok(7_200 * SEC));
    assert!(duration("10").is_err());
    assert_eq!(
        words(r##"SW.LOAD k "L\x01 \"#" <3 bytes> {a}:b"##),
        Ok(vec![
            b"SW.LOAD".to_vec(),
            b"k".to_vec(),
            b"L\x01 \"#".to_vec(),
            b"xxx".to_vec(),
            b"{a}:b".to_vec()
        ])
    );
    assert_eq!(words("CC.RELEASE k <1,025 bytes>").unwrap()[2].len(), 1025);
    assert_eq!(strip_comment(r#"6) "a # b"   # the id"#), r#"6) "a # b""#);
    assert_eq!(strip_comment("> GET user#1"), "> GET user#1");
    let nested = Value::Array(vec![
        Value::Int(1),
        Value::Array(vec![Value::BulkString(b"a\"\x00".to_vec()), Value::Nil]),
        Value::Okay,
    ]);
    assert_eq!(
        render(&Ok(nested), "X"),
        [
            "1) (integer) 1",
            "2) 1) \"a\\\"\\x00\"",
            "   2) (nil)",
            "3) OK"
        ]
    );
    assert_eq!(
        render(
            &Err("ERR wrong number of arguments for 'CL.PEEK' command".into()),
            "CL.PEEK k"
        ),
        ["(error) ERR wrong number of arguments for 'cl.peek' command"]
    );
    assert_eq!(
        cells("| a `x|y` | `B` then `C` | `ERR z` |"),
        ["a `x|y`", "`B` then `C`", "`ERR z`"]
    );
    assert!(is_error_text("ERR z") && is_error_text("WRONGTYPE Operation"));
    assert!(!is_error_text("CL.THROTTLE") && !is_error_text("OK"));
}
