use super::*;

fn parse(text: &str) -> Result<ServeConfig, ConfigError> {
    ServeConfig::parse(text, Path::new("/etc/weft/weft.toml"))
}

#[test]
fn a_full_file_is_read_with_paths_relative_to_it() -> Result<(), ConfigError> {
    let config = parse(
        "addr = \"0.0.0.0:9000\"\nstore = \"memory\"\n[provider]\nname = \"faux\"\n\
         script = \"s.json\"\n[api_keys]\n\"key-number-1\" = \"alice\"\n[limits]\n\
         body_bytes = 10\nremote_tool_timeout = \"2m\"\n[cors]\norigins = [\"*\"]\n",
    )?;
    assert_eq!(config.addr.as_deref(), Some("0.0.0.0:9000"));
    assert_eq!(config.threads, None);
    assert_eq!(config.script, Some(PathBuf::from("/etc/weft/s.json")));
    assert_eq!(config.api_keys.get("key-number-1").map(String::as_str), Some("alice"));
    assert_eq!(config.body_bytes, Some(10));
    assert_eq!(config.remote_tool_timeout, Some(Duration::from_secs(120)));
    assert_eq!(config.cors_origins, vec!["*".to_string()]);
    Ok(())
}

#[test]
fn mistakes_name_file_line_and_key_in_one_line() {
    let cases = [
        ("addr = \"x\"\n[limits]\nbody_bytes = \"big\"\n", "weft.toml:3: limits.body_bytes: "),
        ("[limits]\n\nshutdown_grace = \"soon\"\n", "weft.toml:3: limits.shutdown_grace: "),
        ("[provider]\nnmae = \"faux\"\n", "weft.toml:2: provider.nmae: unknown field `nmae`"),
        ("addr = \n", "weft.toml:1: "),
        ("[api_keys]\nshort = \"bob\"\n", "weft.toml:1: api_keys: an API key must have"),
        ("threads = -1\n", "weft.toml:1: threads: "),
    ];
    for (text, expected) in cases {
        let error = parse(text).err().map(|e| e.0).unwrap_or_default();
        assert!(error.starts_with(&format!("/etc/weft/{expected}")), "{text:?} gave {error:?}");
        assert!(!error.contains('\n'), "{error:?}");
        assert!(!error.contains("short"), "a key leaked: {error:?}");
    }
}

#[test]
fn the_environment_overrides_the_file() -> Result<(), ConfigError> {
    let dir = std::env::temp_dir().join(format!("weft-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| ConfigError(e.to_string()))?;
    let file = dir.join("weft.toml");
    std::fs::write(
        &file,
        "addr = \"127.0.0.1:1\"\nthreads = 4\n[api_keys]\n\"key-number-1\" = \"alice\"\n",
    )
    .map_err(|e| ConfigError(e.to_string()))?;
    assert_eq!(ServeConfig::load(Some(&file), &|_| None)?.threads, Some(4));
    let env = |name: &str| match name {
        "WEFT_ADDR" => Some("127.0.0.1:2".to_string()),
        "WEFT_THREADS" => Some(" 0 ".to_string()),
        "WEFT_API_KEYS" => Some("key-number-2=bob, key-number-3=carol".to_string()),
        _ => None,
    };
    let found = find_file(None, &dir, &env)?;
    assert_eq!(found.as_deref(), Some(file.as_path()));
    let config = ServeConfig::load(found.as_deref(), &env)?;
    assert_eq!(config.addr.as_deref(), Some("127.0.0.1:2"));
    assert_eq!(config.threads, Some(0));
    assert_eq!(config.api_keys.len(), 2);
    assert_eq!(config.api_keys.get("key-number-3").map(String::as_str), Some("carol"));
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn api_key_lists_are_checked_without_repeating_keys() {
    assert!(parse_api_keys("secret-one=alice,secret-two=bob").is_ok_and(|k| k.len() == 2));
    let error = parse_api_keys("secret-one").err().unwrap_or_default();
    assert_eq!(error, "entry 1 is not KEY=OWNER");
    let error = parse_api_keys("a=b").err().unwrap_or_default();
    assert!(error.contains("at least 8") && !error.contains("a=b"), "{error}");
    assert!(parse_api_keys("secret-one=a,secret-one=b").is_err());
}

#[test]
fn more_providers_come_from_the_file_or_the_environment() -> Result<(), ConfigError> {
    let config = parse(
        "[providers.faux]\nscript = \"s.json\"\n[providers.anthropic]\nmodel = \"m\"\n\
         [limits]\nlease_ttl = \"2s\"\nend_commit_timeout = \"45s\"\n",
    )?;
    assert_eq!(config.providers.len(), 2);
    assert_eq!(config.providers["faux"].script, Some(PathBuf::from("/etc/weft/s.json")));
    assert_eq!(config.providers["anthropic"].model.as_deref(), Some("m"));
    assert_eq!(config.lease_ttl, Some(Duration::from_secs(2)));
    assert_eq!(config.end_commit_timeout, Some(Duration::from_secs(45)));
    let error = parse("[providers.faux]\nscrpt = 1\n").err().map(|e| e.0).unwrap_or_default();
    assert!(error.contains("providers.faux.scrpt"), "{error}");
    let listed = parse_providers("anthropic=claude, openai").map_err(ConfigError)?;
    assert_eq!(listed["anthropic"].model.as_deref(), Some("claude"));
    assert_eq!(listed["openai"].model, None);
    assert!(parse_providers("a=1,a=2").is_err());
    Ok(())
}

#[test]
fn tools_tables_are_read_with_paths_relative_to_the_file() -> Result<(), ConfigError> {
    let text = "[[mcp]]\nname = \"files\"\ncommand = \"srv\"\ncwd = \"work\"\n\n\
                [[mcp]]\nname = \"web\"\nurl = \"http://127.0.0.1:9/mcp\"\n\n\
                [builtins]\ntools = [\"read_file\"]\nroot = \"data\"\n\n\
                [tools.shell]\napproval = \"never\"\ntimeout = \"5s\"\n";
    let config = ServeConfig::parse(text, Path::new("/etc/weft/weft.toml"))?;
    let tools = &config.tools;
    assert_eq!(tools.mcp[0].cwd.as_deref(), Some(Path::new("/etc/weft/work")));
    assert_eq!(tools.mcp[1].url.as_deref(), Some("http://127.0.0.1:9/mcp"));
    assert_eq!(tools.builtins.root.as_deref(), Some(Path::new("/etc/weft/data")));
    assert_eq!(tools.tools["shell"].approval, weft_tools::Approval::Never);
    assert_eq!(tools.tools["shell"].timeout, Some(Duration::from_secs(5)));
    let both = "[[mcp]]\nname = \"x\"\ncommand = \"a\"\nurl = \"http://h\"\n";
    let error = ServeConfig::parse(both, Path::new("weft.toml")).err().map(|e| e.0);
    assert_eq!(
        error.as_deref(),
        Some("weft.toml:1: mcp[0]: give command (stdio) or url (HTTP), not both")
    );
    let typo = "[tools.shell]\napproval = \"sometimes\"\n";
    let error = ServeConfig::parse(typo, Path::new("weft.toml")).err().map(|e| e.0);
    assert!(
        error
            .as_deref()
            .is_some_and(|e| e.starts_with("weft.toml:2: tools.shell.approval: unknown variant")),
        "{error:?}"
    );
    Ok(())
}

#[test]
fn connection_limits_are_read_and_applied_over_the_defaults() -> Result<(), ConfigError> {
    let config = parse(
        "[limits]\nheader_timeout = \"5s\"\nidle_timeout = \"2m\"\nwrite_timeout = \"45s\"\n\
         max_connections = 100\nws_sockets_per_key = 8\n\
         ws_streams_per_socket = 4\nws_send_queue = 65536\nws_send_timeout = \"0s\"\n",
    )?;
    let mut settings = Settings::new("faux");
    config.connections.apply(&mut settings);
    assert_eq!(settings.header_timeout, Duration::from_secs(5));
    assert_eq!(settings.idle_timeout, Duration::from_secs(120));
    assert_eq!(settings.write_timeout, Duration::from_secs(45));
    assert_eq!(settings.body_timeout, DEFAULT_BODY_TIMEOUT, "unset keys keep their default");
    assert_eq!(settings.max_connections, 100);
    assert_eq!(settings.ws_sockets_per_key, 8);
    assert_eq!(settings.ws_streams_per_socket, 4);
    assert_eq!(settings.ws_streams_per_key, DEFAULT_WS_STREAMS_PER_KEY);
    assert_eq!(settings.ws_send_queue, 65536);
    assert_eq!(settings.ws_send_timeout, Duration::ZERO);
    let error = parse("[limits]\nidle_timeout = \"soon\"\n").err().map(|e| e.0);
    assert!(
        error
            .as_deref()
            .is_some_and(|e| e.starts_with("/etc/weft/weft.toml:2: limits.idle_timeout: ")),
        "{error:?}"
    );
    Ok(())
}

#[test]
fn an_explicit_file_must_exist() {
    let error = find_file(Some(Path::new("/nonexistent/w.toml")), Path::new("/"), &|_| None);
    assert_eq!(error, Err(ConfigError("config file /nonexistent/w.toml not found".into())));
}

#[test]
fn the_telemetry_section_is_read_and_its_mistakes_named() -> Result<(), ConfigError> {
    let config = parse(
        "[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\ncapture_content = true\n\
         metrics_interval = \"5s\"\nheaders = { authorization = \"Bearer t\" }\n",
    )?;
    let telemetry = &config.telemetry;
    assert_eq!(telemetry.endpoint.as_deref(), Some("http://127.0.0.1:4318"));
    assert_eq!(telemetry.capture_content, Some(true));
    assert_eq!(telemetry.metrics_interval, Some(Duration::from_secs(5)));
    assert_eq!(telemetry.headers["authorization"], "Bearer t");
    let error = parse("[telemetry]\nendpiont = \"http://x\"\n").err().map(|e| e.0);
    let error = error.unwrap_or_default();
    assert!(error.starts_with("/etc/weft/weft.toml:2:") && error.contains("endpiont"), "{error}");
    Ok(())
}

#[test]
fn a_thread_count_that_is_not_a_number_is_named() {
    let env = |name: &str| (name == "WEFT_THREADS").then(|| "many".to_string());
    let error = ServeConfig::load(None, &env).err().map(|e| e.0).unwrap_or_default();
    assert_eq!(error, "WEFT_THREADS: \"many\" is not a number of threads");
}
