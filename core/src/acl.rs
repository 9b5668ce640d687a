//! ACL rules read as the server reads them, for commands the server
//! cannot put in a category itself (module commands on Redis 6.2 and 7.0).

/// Whether an admin command named `command` (`name` or `name|sub`) is
/// allowed by `rules`, the user's command rules in order (`+@all -@admin
/// +cl.top`), for a command that belongs to `@admin` and `@dangerous` and
/// to no other category. Rules that do not name it, nor one of those
/// categories, nor all commands, leave it as it was.
pub fn allows(rules: &str, command: &str) -> bool {
    let parent = command.split('|').next().unwrap_or(command);
    let mut allowed = false;
    for rule in rules.split_ascii_whitespace() {
        let (on, what) = match rule.as_bytes().first() {
            Some(b'+') => (true, &rule[1..]),
            Some(b'-') => (false, &rule[1..]),
            _ => match rule {
                "allcommands" => (true, "@all"),
                "nocommands" => (false, "@all"),
                _ => continue,
            },
        };
        let names_it = ["@all", "@admin", "@dangerous"]
            .iter()
            .any(|c| what.eq_ignore_ascii_case(c))
            || what.eq_ignore_ascii_case(parent)
            || what.eq_ignore_ascii_case(command);
        if names_it {
            allowed = on;
        }
    }
    allowed
}

#[cfg(test)]
mod tests {
    use super::allows;

    #[test]
    fn admin_commands_follow_the_rules_in_order() {
        assert!(allows("+@all", "cl.policy|set"));
        assert!(!allows("+@all -@admin", "cl.policy|set"));
        assert!(!allows("+@all -@dangerous", "cl.top"));
        assert!(!allows("allcommands -@admin", "cl.top"));
        assert!(allows("+@all -@admin +cl.policy", "cl.policy|get"));
        assert!(allows("-@all +cl.policy|get", "cl.policy|get"));
        assert!(!allows("-@all +cl.policy|get", "cl.policy|set"));
        assert!(!allows("+@all -cl.policy", "cl.policy|list"));
        assert!(allows("-@all +@admin", "cl.top"));
        assert!(!allows("", "cl.top"));
        assert!(!allows("nocommands", "cl.top"));
        // Categories the commands are not in change nothing.
        assert!(allows("+@all -@write -@read -@slow", "cl.top"));
        assert!(!allows("-@all +@read +@slow", "cl.top"));
        assert!(allows("+@ALL -@Admin +CL.TOP", "cl.top"));
    }
}
