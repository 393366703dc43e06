//! Marks the integration tests whose server or file is missing as ignored, with the reason (see
//! tests/it/common/needs.rs): sets the cfg `retr_test_missing = "<name>"` for each missing one,
//! and none under `CI` or `RETR_TEST_REQUIRE_SERVERS`, where every test runs.

// The tests' own helpers in that file are not used here.
#[allow(dead_code)]
#[path = "tests/it/common/needs.rs"]
mod needs;

fn main() {
    let names: Vec<String> = needs::NEEDS.iter().map(|need| format!("\"{}\"", need.name)).collect();
    println!("cargo::rustc-check-cfg=cfg(retr_test_missing, values({}))", names.join(", "));
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=tests/it/common/needs.rs");
    for variable in ["CI", "RETR_TEST_REQUIRE_SERVERS"].into_iter().chain(needs::NEEDS.iter().map(|need| need.variable))
    {
        println!("cargo::rerun-if-env-changed={variable}");
    }
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = root.as_str();
    for need in &needs::NEEDS {
        if let Some(path) = need.default_path {
            // A file that appears later is seen at the next change of the variables (or of this file).
            let path = format!("{root}/{path}");
            if std::path::Path::new(&path).exists() {
                println!("cargo::rerun-if-changed={path}");
            }
        }
    }
    let env = |variable: &str| std::env::var(variable).ok();
    let exists = |path: &str| std::path::Path::new(path).exists();
    for name in needs::to_ignore(&env, root, &exists) {
        println!("cargo::rustc-cfg=retr_test_missing=\"{name}\"");
    }
}
