//! Random calls of every public command, as words, in the grammar of
//! docs/grammar.md: mostly valid, some with one defect (a bad number, a
//! missing word, an unknown or repeated option), options in random order
//! and case, durations plain or with units, calendar windows with fixed
//! offsets.

use crate::support::{Rng, MS, SEC};

pub const KINDS: [&str; 4] = ["cl", "sw", "fw", "cc"];

/// The grammar's own words (docs/grammar.md): flags, keywords and limiter
/// kinds, which hostile calls put where a value is due, or twice.
pub const GRAMMAR_WORDS: [&str; 11] = [
    "MS", "ALIGN", "APPROX", "TZ", "ID", "MAXWAIT", "QUANTITY", "GCRA", "SW", "FW", "COUNTALL",
];

/// Keys of every type the module does not own, created alike for the
/// module and the twin before a workload.
pub const OTHER_TYPES: [&str; 5] = [
    "RPUSH other:list a",
    "HSET other:hash f v",
    "SET other:text hello",
    "SET other:number 12",
    "SET other:negative -5",
];

pub struct Gen {
    pub rng: Rng,
    /// Leases the module generated, so later calls can name them.
    pub generated: Vec<Vec<u8>>,
    /// Keys per kind.
    pub keys: usize,
    /// Only the limiters whose state is a plain string: CL and FW.
    pub only_strings: bool,
    /// Sliding windows shorter than a millisecond. On Valkey a log whose
    /// last request leaves such a window within the current millisecond
    /// can outlive the module's key there by that millisecond (README,
    /// "What differs"), so the workload there leaves them out.
    pub sub_ms_windows: bool,
}

fn w(s: impl Into<String>) -> Vec<u8> {
    s.into().into_bytes()
}

impl Gen {
    pub fn new(seed: u64) -> Self {
        Gen {
            rng: Rng(seed | 1),
            generated: Vec::new(),
            keys: 3,
            only_strings: false,
            sub_ms_windows: true,
        }
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.rng.below(n)
    }

    /// True with probability `p` percent.
    pub fn pct(&mut self, p: u64) -> bool {
        self.below(100) < p
    }

    fn one<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }

    /// The next clock step in nanoseconds (whole microseconds), from `now`:
    /// none, tiny, small, onto a window boundary (or one microsecond either
    /// side of it), or a jump of up to 40 days.
    pub fn step(&mut self, now: i64) -> i64 {
        let us = 1_000;
        let next = match self.below(20) {
            0 | 1 => now,
            2 | 3 => now + us,
            4..=7 => now + self.below(1_000) as i64 * us,
            8..=11 => now + self.below(2_000_000) as i64 * us,
            12 | 13 => now + self.below(2_000) as i64 * MS,
            14..=17 => {
                let unit =
                    [SEC / 2, SEC, 60 * SEC, 3600 * SEC, 86_400 * SEC][self.below(5) as usize];
                let edge = (now / unit + 1) * unit;
                edge + [0, us, -us][self.below(3) as usize]
            }
            _ => now + self.below(40 * 86_400_000_000) as i64 * us,
        };
        next.max(now)
    }

    pub fn key(&mut self, kind: &str) -> String {
        if self.pct(4) {
            // A key of another kind or type: WRONGTYPE, or a string that
            // is no TAT or counter.
            if self.pct(50) {
                let other = [
                    "other:list",
                    "other:hash",
                    "other:text",
                    "other:number",
                    "other:negative",
                ];
                return self.one(&other).to_string();
            }
            let kind = if self.only_strings {
                ["cl", "fw"][self.below(2) as usize]
            } else {
                KINDS[self.below(4) as usize]
            };
            return format!("{kind}:{}", self.below(self.keys as u64));
        }
        format!("{kind}:{}", self.below(self.keys as u64))
    }

    /// A count, limit or burst: mostly small, sometimes large.
    fn count(&mut self) -> String {
        match self.below(40) {
            0 => self.one(&["1000", "65535", "2147483648"]).to_string(),
            1 => self
                .one(&["9007199254740993", "9223372036854775807", "1000000000"])
                .to_string(),
            2..=4 => "0".to_string(),
            _ => (1 + self.below(8)).to_string(),
        }
    }

    /// A quantity: mostly 0 to 3, sometimes more than any small limit.
    fn quantity(&mut self) -> String {
        match self.below(20) {
            0 => self
                .one(&["100", "9223372036854775807", "4294967296"])
                .to_string(),
            1..=3 => "0".to_string(),
            _ => (1 + self.below(4)).to_string(),
        }
    }

    /// A duration: plain seconds (integers, decimals, tiny, huge) or a
    /// number with a unit.
    pub fn duration(&mut self) -> String {
        match self.below(30) {
            0 => self
                .one(&["0.000000001", "0.000001", "0.0001", "1.000000001"])
                .to_string(),
            1 => self
                .one(&[
                    "100000000",
                    "9223372036",
                    "9223372036.854775807",
                    "31536000",
                ])
                .to_string(),
            2..=7 => self
                .one(&[
                    "500ms", "250MS", "1.5s", "2S", "15m", "1h", "1d", "0.5ms", "1M", "1H",
                ])
                .to_string(),
            8..=12 => self.one(&["0.5", "1.5", "0.25", "2.5", "0.75"]).to_string(),
            _ => self.one(&["1", "2", "3", "5", "10", "60"]).to_string(),
        }
    }

    /// A fixed-window window: a duration or a calendar unit.
    fn window_or_unit(&mut self) -> (String, bool) {
        if self.pct(25) {
            let unit = self.one(&[
                "minute", "hour", "day", "week", "month", "year", "Day", "MONTH",
            ]);
            (unit.to_string(), true)
        } else {
            (self.duration(), false)
        }
    }

    fn tz(&mut self) -> String {
        self.one(&[
            "+00:00", "-05:00", "+09:30", "+14:00", "-12:00", "+05:45", "-00:30",
        ])
        .to_string()
    }

    fn id(&mut self) -> Vec<u8> {
        if !self.generated.is_empty() && self.pct(40) {
            let i = self.below(self.generated.len() as u64) as usize;
            return self.generated[i].clone();
        }
        w(self.one(&["a", "b", "c", "req-17", "x y"]))
    }

    /// Options in random order, each a group of words; `MS` in random case.
    fn shuffled(&mut self, mut options: Vec<Vec<Vec<u8>>>) -> Vec<Vec<u8>> {
        for i in (1..options.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            options.swap(i, j);
        }
        options.into_iter().flatten().collect()
    }

    fn flag(&mut self, name: &str) -> Vec<Vec<u8>> {
        let spelled = match self.below(4) {
            0 => name.to_lowercase(),
            1 => {
                let mut s = name.to_lowercase();
                if let Some(c) = s.get_mut(0..1) {
                    c.make_ascii_uppercase();
                }
                s
            }
            _ => name.to_string(),
        };
        vec![w(spelled)]
    }

    fn keyword(&mut self, name: &str, value: Vec<u8>) -> Vec<Vec<u8>> {
        let mut f = self.flag(name);
        f.push(value);
        f
    }

    /// One call as words: a valid one, or (with probability `defect_pct`)
    /// one with a defect.
    pub fn call(&mut self, defect_pct: u64) -> Vec<Vec<u8>> {
        let pick = if self.only_strings {
            [0, 4, 6, 8, 9, 17, 21, 22][self.below(8) as usize]
        } else {
            self.below(30)
        };
        let mut words = match pick {
            0..=3 => self.cl("cl.throttle"),
            4 | 5 => self.cl("cl.peek"),
            6 | 7 => self.cl("cl.reserve"),
            8 => self.cl("cl.refund"),
            9..=11 => self.throttleall(),
            12..=14 => self.sw("sw.allow"),
            15 => self.sw("sw.peek"),
            16 => self.sw("sw.refund"),
            17..=20 => self.fw("fw.incr"),
            21 => self.fw("fw.peek"),
            22 => self.fw("fw.refund"),
            23 | 24 => self.cc_acquire(),
            25 => self.cc_release(),
            26 => self.cc_renew(),
            _ => self.cc_peek(),
        };
        if self.pct(defect_pct) {
            self.defect(&mut words);
        }
        words
    }

    /// One defect: a bad number, a dropped word, an unknown or repeated
    /// option, a keyword without its value, an extra word.
    pub fn defect(&mut self, words: &mut Vec<Vec<u8>>) {
        let bad: Vec<&str> = [
            "-1",
            "abc",
            "",
            "1.5",
            "+2",
            "007",
            "1e3",
            "0x10",
            " 1",
            "-0",
            "0",
            "9223372036854775808",
            "-9223372036854775808",
            "18446744073709551616",
            "1.0000000001",
            "1ms5",
            "ms",
            "1 s",
            "1w",
            "-1s",
            ".5",
            "5.",
            "1_000",
            "\u{e9}",
            "APROX",
        ]
        .iter()
        .chain(&GRAMMAR_WORDS)
        .chain(&[
            "+15:00",
            "+5:30",
            "0530",
            "UTC",
            "Europe/Paris",
            "minute",
            "week",
            "1d",
            "NaN",
            "inf",
        ])
        .copied()
        .collect();
        // CL.THROTTLEALL keeps its numkeys and as many words after it:
        // FCALL takes the count itself, so a call without them is no call
        // of the twin.
        let first_arg = if words[0] == b"cl.throttleall" { 2 } else { 1 };
        let min_len = if words[0] == b"cl.throttleall" {
            2 + std::str::from_utf8(&words[1])
                .ok()
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0)
        } else {
            1
        };
        match self.below(6) {
            0 | 1 if words.len() > first_arg + 1 => {
                let i = first_arg + 1 + self.below((words.len() - first_arg - 1) as u64) as usize;
                words[i] = w(self.one(&bad));
            }
            2 if words.len() > first_arg + 1 && words.len() > min_len => {
                let i = first_arg + 1 + self.below((words.len() - first_arg - 1) as u64) as usize;
                words.remove(i);
            }
            3 => {
                // A word appended: a repeated or unknown option.
                words.push(w(self.one(&bad)));
            }
            4 => {
                let i = self.below(words.len() as u64 + 1) as usize;
                let i = i.max(first_arg + 1).min(words.len());
                words.insert(i, w(self.one(&bad)));
            }
            _ => {
                // Cut the call short.
                let keep = 1 + self.below(words.len() as u64) as usize;
                words.truncate(keep.max(min_len));
            }
        }
    }

    fn cl(&mut self, name: &str) -> Vec<Vec<u8>> {
        let mut words = vec![w(name), w(self.key("cl"))];
        words.push(w(self.count()));
        words.push(w(self.count()));
        words.push(w(self.duration()));
        let mut options = Vec::new();
        match name {
            "cl.refund" => words.push(w(self.quantity())),
            "cl.peek" => {}
            _ => {
                if self.pct(60) {
                    options.push(vec![w(self.quantity())]);
                }
            }
        }
        if name == "cl.reserve" {
            let maxwait = if self.pct(50) {
                self.duration()
            } else {
                self.one(&["0", "1", "2", "0.5", "10"]).to_string()
            };
            options.push(self.keyword("MAXWAIT", w(maxwait)));
        }
        if self.pct(30) {
            options.push(self.flag("MS"));
        }
        words.extend(self.shuffled(options));
        words
    }

    /// A sliding window: a duration, at least a millisecond unless
    /// `sub_ms_windows`.
    fn sw_window(&mut self) -> String {
        loop {
            let d = self.duration();
            let short = ["0.000000001", "0.000001", "0.0001", "0.5ms"].contains(&d.as_str());
            if self.sub_ms_windows || !short {
                return d;
            }
        }
    }

    fn sw(&mut self, name: &str) -> Vec<Vec<u8>> {
        let mut words = vec![w(name), w(self.key("sw"))];
        words.push(w(self.count()));
        words.push(w(self.sw_window()));
        let mut options = Vec::new();
        match name {
            "sw.refund" => words.push(w(self.quantity())),
            "sw.peek" => {}
            _ => {
                if self.pct(60) {
                    options.push(vec![w(self.quantity())]);
                }
            }
        }
        // One key is always approximate, one always exact: the module
        // keeps the mode with the key.
        if self.pct(40) {
            options.push(self.flag("APPROX"));
        }
        if self.pct(30) {
            options.push(self.flag("MS"));
        }
        words.extend(self.shuffled(options));
        words
    }

    fn fw(&mut self, name: &str) -> Vec<Vec<u8>> {
        let mut words = vec![w(name), w(self.key("fw"))];
        words.push(w(self.count()));
        let (window, calendar) = self.window_or_unit();
        words.push(w(window));
        let mut options = Vec::new();
        match name {
            "fw.refund" => words.push(w(self.quantity())),
            "fw.peek" => {}
            _ => {
                if self.pct(60) {
                    options.push(vec![w(self.quantity())]);
                }
            }
        }
        if calendar {
            if self.pct(70) {
                let tz = self.tz();
                options.push(self.keyword("TZ", w(tz)));
            }
        } else if self.pct(40) {
            options.push(self.flag("ALIGN"));
        }
        if self.pct(30) {
            options.push(self.flag("COUNTALL"));
        }
        if self.pct(30) {
            options.push(self.flag("MS"));
        }
        words.extend(self.shuffled(options));
        words
    }

    /// A limiter of `CL.THROTTLEALL` for a key of `kind`, with its own
    /// options in random order.
    fn limiter(&mut self, kind: &str) -> Vec<Vec<u8>> {
        match kind {
            "cl" => vec![
                w(self.one(&["GCRA", "gcra"])),
                w(self.count()),
                w(self.count()),
                w(self.duration()),
            ],
            "sw" => {
                let mut words = vec![
                    w(self.one(&["SW", "sw"])),
                    w(self.count()),
                    w(self.sw_window()),
                ];
                if self.pct(40) {
                    words.extend(self.flag("APPROX"));
                }
                words
            }
            _ => {
                let mut words = vec![w(self.one(&["FW", "fw"])), w(self.count())];
                let (window, calendar) = self.window_or_unit();
                words.push(w(window));
                if calendar {
                    if self.pct(70) {
                        let tz = self.tz();
                        words.extend(self.keyword("TZ", w(tz)));
                    }
                } else if self.pct(40) {
                    words.extend(self.flag("ALIGN"));
                }
                if self.pct(30) {
                    words.extend(self.flag("COUNTALL"));
                }
                words
            }
        }
    }

    fn throttleall(&mut self) -> Vec<Vec<u8>> {
        let n = 1 + self.below(3) as usize;
        let mut keys = Vec::new();
        let mut kinds = Vec::new();
        for _ in 0..n {
            let kind = if self.only_strings {
                ["cl", "fw"][self.below(2) as usize]
            } else {
                ["cl", "sw", "fw"][self.below(3) as usize]
            };
            let mut key = self.key(kind);
            // Distinct keys, unless on purpose.
            while keys.contains(&key) && !self.pct(10) {
                key = format!("{kind}:{}", self.below(self.keys as u64));
            }
            keys.push(key);
            kinds.push(kind);
        }
        let mut words = vec![w("cl.throttleall"), w(n.to_string())];
        words.extend(keys.into_iter().map(w));
        for kind in &kinds[..n - 1] {
            let limiter = self.limiter(kind);
            words.extend(limiter);
        }
        // The last limiter's options and the call's in any order.
        let last = self.limiter(kinds[n - 1]);
        let fixed = match kinds[n - 1] {
            "cl" => 4,
            _ => 3,
        };
        words.extend(last[..fixed].iter().cloned());
        let mut options: Vec<Vec<Vec<u8>>> = Vec::new();
        let mut rest = last[fixed..].to_vec();
        while !rest.is_empty() {
            // TZ and its value stay together.
            let take = if rest[0].eq_ignore_ascii_case(b"TZ") {
                2
            } else {
                1
            };
            let take = take.min(rest.len());
            options.push(rest.drain(..take).collect());
        }
        if self.pct(50) {
            let q = self.quantity();
            options.push(self.keyword("QUANTITY", w(q)));
        }
        if self.pct(30) {
            options.push(self.flag("MS"));
        }
        words.extend(self.shuffled(options));
        words
    }

    fn cc_acquire(&mut self) -> Vec<Vec<u8>> {
        let mut words = vec![w("cc.acquire"), w(self.key("cc"))];
        words.push(w(self.count()));
        words.push(w(self.duration()));
        let mut options = Vec::new();
        if self.pct(50) {
            let id = if self.pct(2) {
                vec![b'i'; 1025]
            } else {
                self.id()
            };
            options.push(self.keyword("ID", id));
        }
        if self.pct(30) {
            options.push(self.flag("MS"));
        }
        words.extend(self.shuffled(options));
        words
    }

    fn cc_release(&mut self) -> Vec<Vec<u8>> {
        vec![w("cc.release"), w(self.key("cc")), self.id()]
    }

    fn cc_renew(&mut self) -> Vec<Vec<u8>> {
        vec![
            w("cc.renew"),
            w(self.key("cc")),
            self.id(),
            w(self.duration()),
        ]
    }

    fn cc_peek(&mut self) -> Vec<Vec<u8>> {
        let mut words = vec![w("cc.peek"), w(self.key("cc")), w(self.count())];
        if self.pct(30) {
            words.extend(self.flag("MS"));
        }
        words
    }
}
