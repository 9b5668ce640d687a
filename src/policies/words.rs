//! A policy made from its words: the limiter (and its trial) read by
//! `CL.THROTTLEALL`'s grammar, with the rules of the time zone it names,
//! here or as they came from a master, an AOF or an RDB file.

use super::registry::Unusable;
use crate::error::{self, CmdError};
use crate::limiter::{self, Limiter};
use crate::zones;
use cell_core::zoned;

/// A policy as made from its words (and zone rules), before it is stored.
pub struct Made {
    pub limiter: Option<Limiter>,
    /// The trial's limiter (`limiter TRIAL limiter`), if any.
    pub trial: Option<Limiter>,
    pub words: Vec<Vec<u8>>,
    pub zone: Option<Vec<u8>>,
    pub unusable: Option<Unusable>,
}

/// The zone named after `TZ` in a limiter's words, if any.
pub fn zone_word(words: &[Vec<u8>]) -> Option<&[u8]> {
    words
        .windows(2)
        .skip(1)
        .find(|w| w[0].eq_ignore_ascii_case(b"TZ"))
        .map(|w| w[1].as_slice())
}

/// Makes the policy a user's `CL.POLICY SET` gives, on the node where it
/// is set: the limiter is read with the zone rules this server has, and
/// those rules are kept with the policy (and then used here too, so that
/// this node and every node given them decide alike). Errors are the
/// user's: a zone this server does not know is `BAD_TZ`.
pub fn made_here(words: Vec<Vec<u8>>) -> Result<Made, CmdError> {
    let (limiter, trial) = policy_of(&words)?;
    if let Some((_, tzif)) = zone_word(&words).and_then(zoned::find_tzif) {
        if let Some(made) = made_with_rules(words.clone(), tzif) {
            return Ok(made);
        }
    }
    Ok(Made {
        limiter: Some(limiter),
        trial,
        words,
        zone: None,
        unusable: None,
    })
}

/// The limiter of `words` with the zone it names taken from `tzif`.
fn made_with_rules(words: Vec<Vec<u8>>, tzif: Vec<u8>) -> Option<Made> {
    let word = std::str::from_utf8(zone_word(&words)?).ok()?.to_string();
    let zone = zoned::from_tzif(&word, &tzif)?;
    let (limiter, trial) = zones::with_pinned(&word, zone, || policy_of(&words)).ok()?;
    Some(Made {
        limiter: Some(limiter),
        trial,
        words,
        zone: Some(tzif),
        unusable: None,
    })
}

/// Makes a policy that comes from elsewhere: a master, an AOF, an RDB
/// file. Never an error: a policy this server cannot use is kept, marked
/// unusable (and logged), so that a load never fails and no policy is
/// dropped because of one node's time zone database or version.
pub fn made_from(name: &[u8], words: Vec<Vec<u8>>, zone: Option<Vec<u8>>) -> Made {
    if let Some(tzif) = zone.clone() {
        if let Some(made) = made_with_rules(words.clone(), tzif) {
            return made;
        }
    }
    match policy_of(&words) {
        Ok((limiter, trial)) => Made {
            limiter: Some(limiter),
            trial,
            words,
            zone,
            unusable: None,
        },
        Err(e) => {
            let unusable = match zone_word(&words) {
                Some(z) if e == error::BAD_TZ => Unusable::Zone(z.to_vec()),
                _ => Unusable::Words,
            };
            let why = match &unusable {
                Unusable::Zone(z) => format!(
                    "it uses the time zone '{}', which this server's time zone database does not have and whose rules did not come with it",
                    String::from_utf8_lossy(z)
                ),
                Unusable::Words => format!(
                    "its limiter is not one this version reads: {}",
                    String::from_utf8_lossy(&words.join(&b' '))
                ),
            };
            redis_module::logging::log_warning(format!(
                "redis-cell: policy '{}' is kept but cannot be used on this server: {why}; calls that name it answer an error until it is set again",
                String::from_utf8_lossy(name)
            ));
            Made {
                limiter: None,
                trial: None,
                words,
                zone,
                unusable: Some(unusable),
            }
        }
    }
}

/// A policy's words split at `TRIAL`: the enforced limiter's, and the
/// trial's if there is one (a `TRIAL` that is a `TZ` value does not split).
pub fn split_trial(words: &[Vec<u8>]) -> (&[Vec<u8>], Option<&[Vec<u8>]>) {
    let at = (0..words.len()).find(|&i| {
        words[i].eq_ignore_ascii_case(b"TRIAL")
            && !(i > 0 && words[i - 1].eq_ignore_ascii_case(b"TZ"))
    });
    match at {
        Some(i) => (&words[..i], Some(&words[i + 1..])),
        None => (words, None),
    }
}

/// A policy's limiter and its trial's from its words (`limiter [TRIAL
/// limiter]`), each read as [`limiter_of`] reads one, of one kind.
pub fn policy_of(words: &[Vec<u8>]) -> Result<(Limiter, Option<Limiter>), CmdError> {
    let (own, trial) = split_trial(words);
    let limiter = limiter_of(own)?;
    let trial = match trial {
        None => None,
        Some(words) => {
            let t = limiter_of(words)?;
            if limiter::family(&t) != limiter::family(&limiter) {
                return Err(error::TRIAL_KIND);
            }
            Some(t)
        }
    };
    Ok((limiter, trial))
}

/// A policy's limiter from its words, read by `CL.THROTTLEALL`'s grammar
/// (all words must be taken).
pub fn limiter_of(words: &[Vec<u8>]) -> Result<Limiter, CmdError> {
    let word = |i: usize| words.get(i).map(Vec::as_slice);
    let kind = word(0)
        .and_then(limiter::kind_of)
        .ok_or(error::UNKNOWN_LIMITER)?;
    let read = limiter::read(&word, kind, 1, &[], &|_| false, error::POLICY_LIMITER_WORDS)?;
    if read.next != words.len() {
        return Err(error::POLICY_LIMITER_WORDS);
    }
    Ok(read.limiter)
}
