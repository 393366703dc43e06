//! Ops reload the themes, boosting and synonyms files without a restart: a good reload changes
//! what searches use, a broken file keeps the files in use and says so in the answer, `/health`
//! and `/metrics`, and a later good reload clears it.

use crate::common::{error_code, fixture_state, send, send_request};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use retrieval_service::config::Settings;
use retrieval_service::AppState;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const RELOAD: &str = "/internal/retrieval/config/reload";

/// The project's config files copied to `dir`, and a state reading them there.
fn state_over_copies(dir: &Path, admin_token: &str) -> AppState {
    state_over_copies_with(dir, admin_token, |_| {})
}

/// `state_over_copies` with other settings adjusted by `adjust`.
fn state_over_copies_with(dir: &Path, admin_token: &str, adjust: impl FnOnce(&mut Settings)) -> AppState {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(root.join("config/themes.yaml"), dir.join("themes.yaml")).unwrap();
    std::fs::copy(root.join("config/boosting.yaml"), dir.join("boosting.yaml")).unwrap();
    std::fs::create_dir_all(dir.join("synonyms")).unwrap();
    std::fs::copy(root.join("config/synonyms/_all.txt"), dir.join("synonyms/_all.txt")).unwrap();
    let token = admin_token.to_string();
    fixture_state(|settings| {
        settings.themes_path = dir.join("themes.yaml");
        settings.boosting_path = dir.join("boosting.yaml");
        settings.synonyms_dir = dir.join("synonyms");
        settings.admin_token = retrieval_service::config::Secret::new(token.as_str());
        adjust(settings);
    })
}

/// Whether any hit of the query got a lexical rank (the query's words, with synonyms, met a record).
async fn lexical_hits(state: &AppState, query: &str) -> usize {
    let body = json!({"query": query, "tenant_id": "t1", "explain": true}).to_string();
    let (status, answer) = send(state, "POST", "/internal/retrieval/search", Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["hits"].as_array().unwrap().iter().filter(|hit| !hit["explain"]["lexical_rank"].is_null()).count()
}

async fn health(state: &AppState) -> Value {
    let (status, health) = send(state, "GET", "/health", None).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    health
}

async fn metrics(state: &AppState) -> String {
    let (_, body) = send(state, "GET", "/metrics", None).await;
    body.as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_good_reload_changes_what_searches_use_and_a_broken_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = state_over_copies(dir.path(), "");
    let themes_before = state.search.theme_list().len();
    // A made-up word meets no record until a synonym maps it to the docs' word.
    assert_eq!(lexical_hits(&state, "зюзябра").await, 0);

    let synonyms = dir.path().join("synonyms/_all.txt");
    let mut text = std::fs::read_to_string(&synonyms).unwrap();
    text.push_str("зюзябра => супервизор\n");
    std::fs::write(&synonyms, text).unwrap();
    let themes = dir.path().join("themes.yaml");
    let extra = "\n  - id: reload_probe\n    display_name: Проба\n    section: probe\n    keywords: [проба]\n";
    std::fs::write(&themes, std::fs::read_to_string(&themes).unwrap() + extra).unwrap();
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["generation"], 1, "{answer}");
    assert!(lexical_hits(&state, "зюзябра").await > 0, "the new synonym is in use");
    assert_eq!(state.search.theme_list().len(), themes_before + 1);
    let (_, openapi) = send(&state, "GET", "/internal/retrieval/openapi.json", None).await;
    assert!(openapi.to_string().contains("reload_probe"), "the OpenAPI document lists the new theme");
    assert!(metrics(&state).await.contains("retrieval_config_reloads_total{outcome=\"ok\"} 1"));

    // A malformed synonym line and a broken boosting file: rejected, the files in use stay.
    std::fs::write(&synonyms, "зюзябра\n").unwrap();
    std::fs::write(dir.path().join("boosting.yaml"), "fusion: [\n").unwrap();
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(error_code(&answer), "invalid_request");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("RETR_SYNONYMS_DIR: _all.txt: line 1"), "{message}");
    assert!(message.contains("RETR_BOOSTING_PATH"), "{message}");
    assert!(lexical_hits(&state, "зюзябра").await > 0, "the synonyms in use stay");
    assert_eq!(state.search.theme_list().len(), themes_before + 1);
    let status = health(&state).await;
    assert_eq!(status["status"], "degraded", "{status}");
    let reason = status["error"].as_str().unwrap();
    assert!(reason.contains("reload was rejected (RETR_BOOSTING_PATH, RETR_SYNONYMS_DIR)"), "{reason}");
    assert!(!status.to_string().contains(&*dir.path().to_string_lossy()), "no server path in /health: {status}");
    let scraped = metrics(&state).await;
    assert!(scraped.contains("retrieval_config_reloads_total{outcome=\"rejected\"} 1"), "{scraped}");
    assert!(scraped.contains("retrieval_config_reload_rejected 1"), "{scraped}");

    // Fixed: the next reload goes through and clears the warning.
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("config/boosting.yaml"), dir.path().join("boosting.yaml"))
        .unwrap();
    std::fs::write(&synonyms, "# no rules\n").unwrap();
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["generation"], 2, "{answer}");
    assert_eq!(lexical_hits(&state, "зюзябра").await, 0, "the synonym is gone");
    assert_eq!(health(&state).await["status"], "ok");
    assert!(metrics(&state).await.contains("retrieval_config_reload_rejected 0"));
}

#[tokio::test]
async fn a_reload_that_loses_a_theme_a_dify_knowledge_base_names_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(root.join("config/themes.yaml"), dir.path().join("themes.yaml")).unwrap();
    let bases = dir.path().join("knowledge.yaml");
    std::fs::write(&bases, "knowledge_bases:\n  operators:\n    tenant_id: t1\n    theme: user_agent\n").unwrap();
    let state = fixture_state(|settings| {
        settings.themes_path = dir.path().join("themes.yaml");
        settings.dify_knowledge_bases = bases.clone();
    });
    let without =
        std::fs::read_to_string(dir.path().join("themes.yaml")).unwrap().replace("id: user_agent", "id: renamed");
    std::fs::write(dir.path().join("themes.yaml"), without).unwrap();
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("\"user_agent\""), "{answer}");
    assert!(state.search.theme_list().iter().any(|theme| theme.id == "user_agent"), "the themes in use stay");
}

#[tokio::test]
async fn with_an_admin_token_a_reload_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = state_over_copies(dir.path(), "s3cret-admin-token");
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{answer}");
    let request = Request::builder()
        .method("POST")
        .uri(RELOAD)
        .header("authorization", "Bearer s3cret-admin-token")
        .body(Body::empty())
        .unwrap();
    let (status, answer) = send_request(&state, request).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

/// The SHA-256 of each tuning file in use, by setting, as `GET /config` names them.
async fn in_use(state: &AppState) -> BTreeMap<String, String> {
    let (status, config) = send(state, "GET", "/internal/retrieval/config", None).await;
    assert_eq!(status, StatusCode::OK, "{config}");
    assert!(config["max_results"].is_number(), "the runtime settings are still there: {config}");
    let files = config["tuning"]["files"].as_array().unwrap_or_else(|| panic!("no tuning files in {config}"));
    files
        .iter()
        .map(|file| (file["setting"].as_str().unwrap().into(), file["sha256"].as_str().unwrap().into()))
        .collect()
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The project's boosting.yaml cut before its `structure:` section, and its themes file cut
/// before its themes (what a half-copied file looks like).
fn truncated(text: &str, before: &str) -> String {
    text[..text.find(before).unwrap()].to_string()
}

/// A boosting.yaml or themes file that holds nothing, or that lost its tail, is refused at a
/// reload (422 naming the setting, the file and what is missing); the files in use stay, as
/// `/config` shows, and `/health` says so.
#[tokio::test]
async fn an_empty_or_truncated_file_is_refused_at_a_reload_and_the_files_in_use_stay() {
    let dir = tempfile::tempdir().unwrap();
    let state = state_over_copies(dir.path(), "");
    let before = in_use(&state).await;
    let themes_before = state.search.theme_list().len();
    let boosting = std::fs::read_to_string(dir.path().join("boosting.yaml")).unwrap();
    let themes = std::fs::read_to_string(dir.path().join("themes.yaml")).unwrap();
    assert_eq!(before["RETR_BOOSTING_PATH"], sha256(boosting.as_bytes()));
    let cases = [
        ("boosting.yaml", "RETR_BOOSTING_PATH", String::new(), "holds no section"),
        ("boosting.yaml", "RETR_BOOSTING_PATH", "# every factor\n".to_string(), "holds no section"),
        ("boosting.yaml", "RETR_BOOSTING_PATH", "{}\n".to_string(), "holds no section"),
        ("boosting.yaml", "RETR_BOOSTING_PATH", truncated(&boosting, "\nstructure:"), "lacks structure, source_boosts"),
        ("themes.yaml", "RETR_THEMES_PATH", String::new(), "holds nothing"),
        ("themes.yaml", "RETR_THEMES_PATH", "{}\n".to_string(), "holds nothing"),
        ("themes.yaml", "RETR_THEMES_PATH", truncated(&themes, "\nthemes:"), "lacks themes"),
        ("themes.yaml", "RETR_THEMES_PATH", "router: {}\nthemes: []\n".to_string(), "defines no theme"),
    ];
    for (file, setting, text, problem) in cases {
        let path = dir.path().join(file);
        let good = std::fs::read(&path).unwrap();
        std::fs::write(&path, &text).unwrap();
        let (status, answer) = send(&state, "POST", RELOAD, None).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{text:?}: {answer}");
        assert_eq!(error_code(&answer), "invalid_request");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("{setting}: {file}: {problem}")), "{text:?}: {message}");
        assert_eq!(in_use(&state).await, before, "{text:?}: the files in use stay");
        assert_eq!(state.search.theme_list().len(), themes_before);
        let health = health(&state).await;
        assert_eq!(health["status"], "degraded", "{health}");
        assert!(health["error"].as_str().unwrap().contains(&format!("reload was rejected ({setting})")), "{health}");
        std::fs::write(&path, good).unwrap();
    }
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(health(&state).await["status"], "ok");
}

/// At start-up the same files stop the service, naming the setting and the file.
#[tokio::test]
async fn an_empty_or_truncated_file_stops_start_up() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let boosting = std::fs::read_to_string(root.join("config/boosting.yaml")).unwrap();
    let themes = std::fs::read_to_string(root.join("config/themes.yaml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("boosting.yaml", "RETR_BOOSTING_PATH", String::new(), "holds no section"),
        ("boosting.yaml", "RETR_BOOSTING_PATH", "{}\n".to_string(), "holds no section"),
        ("boosting.yaml", "RETR_BOOSTING_PATH", truncated(&boosting, "\nstructure:"), "lacks structure, source_boosts"),
        ("themes.yaml", "RETR_THEMES_PATH", "# no themes yet\n".to_string(), "holds nothing"),
        ("themes.yaml", "RETR_THEMES_PATH", truncated(&themes, "\nthemes:"), "lacks themes"),
    ];
    for (file, setting, text, problem) in cases {
        let path = dir.path().join(file);
        std::fs::write(&path, &text).unwrap();
        let mut settings = Settings::default();
        match setting {
            "RETR_BOOSTING_PATH" => settings.boosting_path = path.clone(),
            _ => settings.themes_path = path.clone(),
        }
        let error = match retrieval_service::startup::build_state(settings).await {
            Ok(_) => panic!("{text:?} started"),
            Err(error) => error.to_string(),
        };
        assert!(error.contains(&format!("{setting}: {file}: {problem}")), "{text:?}: {error}");
        assert!(error.contains(&format!("{setting} is {}", path.display())), "{error}");
    }
}

/// A file renamed over the configured one while reloads run: each reload reads each file once,
/// so what it puts in use is one of the versions written, whole, never a mix of a checked one and
/// another read after it; an empty version in the mix is refused, never put in use.
#[tokio::test]
async fn racing_reloads_put_in_use_only_whole_files() {
    let dir = tempfile::tempdir().unwrap();
    let state = state_over_copies(dir.path(), "");
    let boosting = std::fs::read_to_string(dir.path().join("boosting.yaml")).unwrap();
    let themes = std::fs::read_to_string(dir.path().join("themes.yaml")).unwrap();
    let extra = "\n  - id: race_probe\n    display_name: Проба\n    section: probe\n";
    let boosting_versions = [boosting.clone(), boosting.replace("lexical: 0.7", "lexical: 0.6"), String::new()];
    let themes_versions = [themes.clone(), format!("{themes}{extra}"), String::new()];
    let themes_count = state.search.theme_list().len();
    // The number of themes each whole version puts in use, by its digest.
    let good_themes: BTreeMap<String, usize> = [
        (sha256(themes_versions[0].as_bytes()), themes_count),
        (sha256(themes_versions[1].as_bytes()), themes_count + 1),
    ]
    .into();
    let good_boosting = [sha256(boosting_versions[0].as_bytes()), sha256(boosting_versions[1].as_bytes())];

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (dir, stop) = (dir.path().to_path_buf(), stop.clone());
        std::thread::spawn(move || {
            let mut turn = 0_usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (file, text) = if turn.is_multiple_of(2) {
                    ("boosting.yaml", &boosting_versions[(turn / 2) % 3])
                } else {
                    ("themes.yaml", &themes_versions[(turn / 2) % 3])
                };
                let staged = dir.join(format!("{file}.new"));
                std::fs::write(&staged, text).unwrap();
                std::fs::rename(&staged, dir.join(file)).unwrap();
                turn += 1;
            }
            turn
        })
    };
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..300 {
        let (status, answer) = send(&state, "POST", RELOAD, None).await;
        match status {
            StatusCode::OK => accepted += 1,
            StatusCode::UNPROCESSABLE_ENTITY => refused += 1,
            other => panic!("{other}: {answer}"),
        }
        let files = in_use(&state).await;
        assert!(good_boosting.contains(&files["RETR_BOOSTING_PATH"]), "{status}: boosting in use: {files:?}");
        let themes_in_use = good_themes.get(&files["RETR_THEMES_PATH"]);
        assert!(themes_in_use.is_some(), "{status}: themes in use: {files:?}");
        assert_eq!(
            Some(&state.search.theme_list().len()),
            themes_in_use,
            "the themes in use are those of the file named"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(accepted > 0 && refused > 0 && swaps > 300, "{accepted} accepted, {refused} refused, {swaps} swaps");
}

/// A synonyms file over `RETR_CONFIG_MAX_FILE_BYTES` is refused (at a reload, and at start-up)
/// without being read whole.
#[tokio::test]
async fn a_file_over_the_size_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = state_over_copies_with(dir.path(), "", |settings| settings.config_max_file_bytes = 64 * 1024);
    let before = in_use(&state).await;
    let synonyms = dir.path().join("synonyms/_all.txt");
    let big: String = (0..10_000).map(|n| format!("слово{n}, word{n}\n")).collect();
    assert!(big.len() > 64 * 1024);
    std::fs::write(&synonyms, &big).unwrap();
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("RETR_SYNONYMS_DIR: _all.txt: ") && message.contains("over the limit of 65536"),
        "{message}"
    );
    assert_eq!(in_use(&state).await, before);
    let settings =
        Settings { synonyms_dir: dir.path().join("synonyms"), config_max_file_bytes: 64 * 1024, ..Settings::default() };
    let error = retrieval_service::startup::build_state(settings).await.err().expect("refused").to_string();
    assert!(error.contains("RETR_SYNONYMS_DIR: _all.txt: ") && error.contains("over the limit"), "{error}");
}

/// A reload that takes longer than `RETR_CONFIG_RELOAD_TIMEOUT_SECONDS` is answered 504 and puts
/// nothing in use, even when its read finishes later; while its read goes on, another reload is
/// answered 409 `reload_in_progress` at once (not queued), and `/health` answers and names the
/// file.
#[tokio::test]
async fn a_slow_reload_times_out_changes_nothing_and_a_second_one_is_409() {
    let dir = tempfile::tempdir().unwrap();
    let state = state_over_copies_with(dir.path(), "", |settings| settings.config_reload_timeout_seconds = 0.02);
    let before = in_use(&state).await;
    // Large enough that reading and parsing it takes far longer than 20 ms.
    let rules: String = (0..60_000).map(|n| format!("слово{n}, другое{n}, word{n}\n")).collect();
    assert!(rules.len() < 4 << 20);
    std::fs::write(dir.path().join("synonyms/_all.txt"), &rules).unwrap();
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{answer}");
    assert_eq!(error_code(&answer), "timeout");
    let (status, answer) = send(&state, "POST", RELOAD, None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    assert_eq!(error_code(&answer), "reload_in_progress");
    let (_, openapi) = send(&state, "GET", "/internal/retrieval/openapi.json", None).await;
    assert!(openapi["paths"][RELOAD]["post"]["responses"]["409"].is_object(), "the 409 is documented");
    let started = Instant::now();
    let health = health(&state).await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(health["status"], "degraded", "{health}");
    assert!(health["error"].as_str().unwrap().contains("reload was rejected (RETR_"), "{health}");
    // The slow read ends (409 no more); what it read was never put in use.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, answer) = send(&state, "POST", RELOAD, None).await;
        match status {
            StatusCode::CONFLICT => {}
            StatusCode::GATEWAY_TIMEOUT => break,
            other => panic!("{other}: {answer}"),
        }
        assert!(Instant::now() < deadline, "the reload slot is never freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(in_use(&state).await, before);
    assert_eq!(state.search.tuning_status().generation, 0);
}

/// One HTTP/1.1 request over a plain socket (the client shares nothing with the server's
/// runtime): the status and body, or `None` when no answer came within `wait`.
fn http(address: std::net::SocketAddr, method: &str, path: &str, wait: Duration) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(wait)).ok()?;
    let request = format!("{method} {path} HTTP/1.1\r\nhost: test\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).ok()?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.split(' ').nth(1)?.parse().ok()?;
    Some((status, answer.split("\r\n\r\n").nth(1).unwrap_or_default().to_string()))
}

/// A tuning file that is a FIFO nobody writes: a reload never waits on it (it is refused, naming
/// the file), two reloads at once leave `/health` answering at once on a server with two async
/// workers, and the files in use stay.
#[test]
fn a_config_file_that_is_a_fifo_never_wedges_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let state = state_over_copies(dir.path(), "");
    let boosting = dir.path().join("boosting.yaml");
    let before = sha256(&std::fs::read(&boosting).unwrap());
    std::fs::remove_file(&boosting).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&boosting).status().expect("mkfifo runs");
    assert!(made.success());

    let (address_sender, address) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            address_sender.send(listener.local_addr().unwrap()).unwrap();
            let _ = retrieval_service::server::serve(listener, state, async {
                let _ = stopped.await;
            })
            .await;
        });
    });
    let address = address.recv().unwrap();
    // Whatever happens, a writer comes after a while, so a read stuck on the FIFO ends and the
    // test fails on its bounds instead of hanging (opening a FIFO to read and write never waits).
    let fifo = boosting.clone();
    let _unblock = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(5));
        for _ in 0..4 {
            drop(std::fs::OpenOptions::new().read(true).write(true).open(&fifo));
            std::thread::sleep(Duration::from_millis(100));
        }
    });

    let started = Instant::now();
    let reloads: Vec<_> =
        (0..2).map(|_| std::thread::spawn(move || http(address, "POST", RELOAD, Duration::from_secs(30)))).collect();
    std::thread::sleep(Duration::from_millis(200));
    let asked = Instant::now();
    let health = http(address, "GET", "/health", Duration::from_secs(30));
    let health_took = asked.elapsed();
    assert!(health_took < Duration::from_secs(1), "/health took {health_took:?}: {health:?}");
    for reload in reloads {
        let (status, body) = reload.join().unwrap().expect("the reload is answered");
        assert!(status == 422 || status == 409, "{status}: {body}");
        if status == 422 {
            assert!(body.contains("RETR_BOOSTING_PATH: boosting.yaml: not a regular file"), "{body}");
        }
    }
    assert!(started.elapsed() < Duration::from_secs(3), "the reloads took {:?}", started.elapsed());
    let (status, health) = http(address, "GET", "/health", Duration::from_secs(5)).expect("/health answers");
    assert_eq!(status, 200);
    assert!(health.contains("reload was rejected (RETR_BOOSTING_PATH)"), "{health}");
    let (_, config) =
        http(address, "GET", "/internal/retrieval/config", Duration::from_secs(5)).expect("/config answers");
    assert!(config.contains(&before), "the boosting in use stays: {config}");
    let _ = stop.send(());
    server.join().unwrap();
}
