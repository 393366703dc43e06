//! Starts the real binary as a new user would (`serve`, mock mode, demo corpus) and runs every
//! curl example of the README against it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A minimal HTTP/1.1 client (Connection: close) so the test needs no extra crate.
fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// (method, path, body) of every `curl` line in the README's API examples.
fn readme_examples() -> Vec<(String, String, Option<String>)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    readme
        .lines()
        .filter(|line| line.starts_with("curl ") && line.contains("127.0.0.1:8080"))
        .map(|line| {
            let url_start = line.find("http://127.0.0.1:8080").unwrap() + "http://127.0.0.1:8080".len();
            let path: String =
                line[url_start..].chars().take_while(|c| !c.is_whitespace() && *c != '\'' && *c != '"').collect();
            let body = line.find("-d '").map(|start| {
                let rest = &line[start + 4..];
                rest[..rest.rfind('\'').unwrap()].to_string()
            });
            let method = if body.is_some() { "POST" } else { "GET" }.to_string();
            (method, path, body)
        })
        .collect()
}

#[test]
fn the_readme_examples_work_against_the_real_binary() {
    let examples = readme_examples();
    assert!(examples.len() >= 5, "README should show curl examples for every endpoint: {examples:?}");
    let port = free_port();
    // The feedback example needs a feedback directory.
    let feedback = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_retrieval-service"))
        .args(["serve", "--port", &port.to_string()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "warn")
        .env("RETR_FEEDBACK_DIR", feedback.path())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let _server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the service did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    for (method, path, body) in examples {
        let (status, response) = http(port, &method, &path, body.as_deref());
        assert_eq!(status, 200, "{method} {path} {body:?} → {status} {response}");
        let json: serde_json::Value = serde_json::from_str(&response).unwrap_or(serde_json::Value::Null);
        if path.ends_with("/search") {
            assert!(!json["hits"].as_array().unwrap().is_empty(), "README search example found nothing: {body:?}");
        }
        if path.ends_with("/dify/retrieval") {
            let records = json["records"].as_array().unwrap();
            assert!(!records.is_empty(), "README Dify example found nothing: {body:?}");
            assert!(records.iter().all(|r| r["score"].as_f64().unwrap() >= 0.5 && r["metadata"].is_object()));
        }
    }
}
