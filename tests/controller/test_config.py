"""`rpp run`'s configuration: defaults, and one line naming the variable for each bad value."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rpp.controller.config import Config, ConfigError, load_config

KEY = "rp_live_SECRET_key_123"
BASE = {"RUNPOD_API_KEY": KEY}


def test_only_the_api_key_is_required_and_everything_else_has_the_documented_default() -> None:
    config = load_config(BASE)

    assert config.runpod_api_key == KEY
    assert config.namespace is None  # the controller's own, found when it connects
    assert config.crd_group == "runpodpool.ownego.com"
    assert config.prometheus_url is None
    assert config.reconcile_interval == 30.0
    assert (config.listen_host, config.listen_port) == ("0.0.0.0", 8080)
    assert config.health_listen is None  # /healthz on LISTEN_ADDRESS only
    assert config.log_level == "INFO"
    assert config.log_format == "text"
    assert config.runpod_api_url == "https://api.runpod.io"
    assert config.proxy_pattern == "https://{pod_id}-{port}.proxy.runpod.net"


def test_every_variable_is_read() -> None:
    config = load_config(
        {
            **BASE,
            "NAMESPACE": "gpu",
            "CRD_GROUP": "pools.example.com",
            "PROMETHEUS_URL": "http://prom.monitoring.svc:9090/",
            "RECONCILE_INTERVAL": "45s",
            "LISTEN_ADDRESS": "[::]:9090",
            "HEALTH_LISTEN_ADDRESS": "0.0.0.0:9091",
            "LOG_LEVEL": "debug",
            "LOG_FORMAT": "JSON",
            "RUNPOD_API_URL": "http://127.0.0.1:9000/",
            "RUNPOD_PROXY_URL": "http://127.0.0.1:9000",
            "POD_NAME": "rpp-7d9f-x2",
            "RUNPOD_MAX_ANSWER_MB": "64",
        }
    )

    assert config.namespace == "gpu"
    assert config.crd_group == "pools.example.com"
    assert config.prometheus_url == "http://prom.monitoring.svc:9090"
    assert config.reconcile_interval == 45.0
    assert (config.listen_host, config.listen_port) == ("::", 9090)
    assert config.health_listen == ("0.0.0.0", 9091)
    assert (config.log_level, config.log_format) == ("DEBUG", "json")
    assert config.runpod_api_url == "http://127.0.0.1:9000"
    assert config.proxy_pattern == "http://127.0.0.1:9000"
    assert config.pod_name == "rpp-7d9f-x2"
    assert config.runpod_max_answer_mb == 64


BAD_VALUES = pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        pytest.param("RUNPOD_API_KEY", "", "not set", id="key-empty"),
        pytest.param("RUNPOD_API_KEY", "abc def", "whitespace", id="key-with-space"),
        pytest.param("NAMESPACE", "Run_Pod", "not a namespace name", id="namespace"),
        pytest.param("CRD_GROUP", "nodots", "not an API group", id="crd-group"),
        pytest.param("PROMETHEUS_URL", "prom:9090", "not an http(s) URL", id="prometheus"),
        pytest.param("RECONCILE_INTERVAL", "often", "not a number of seconds", id="interval"),
        pytest.param("RECONCILE_INTERVAL", "0", "out of range", id="interval-zero"),
        pytest.param("LISTEN_ADDRESS", "8080", "no host:port", id="listen-no-host"),
        pytest.param("LISTEN_ADDRESS", "0.0.0.0:99999", "not 1-65535", id="listen-port"),
        pytest.param("HEALTH_LISTEN_ADDRESS", "8081", "no host:port", id="health-no-host"),
        pytest.param(
            "HEALTH_LISTEN_ADDRESS", "0.0.0.0:8080", "is LISTEN_ADDRESS's too", id="health-same"
        ),
        pytest.param("LOG_LEVEL", "LOUD", "not one of", id="log-level"),
        pytest.param("LOG_FORMAT", "xml", "not text or json", id="log-format"),
        pytest.param("RUNPOD_API_URL", "api.runpod.io", "not an http(s) URL", id="api-url"),
        pytest.param("RUNPOD_API_URL", "https://api.runpod.io/v2", "base URL", id="api-url-v2"),
        pytest.param("RUNPOD_PROXY_URL", "127.0.0.1:9000", "not an http(s) URL", id="proxy"),
        pytest.param("RUNPOD_PROXY_URL", "http://{pod}.x", "URL pattern", id="proxy-pattern"),
        pytest.param("RUNPOD_MAX_ANSWER_MB", "0", "from 1 to 1024", id="answer-limit-zero"),
        pytest.param("RUNPOD_MAX_ANSWER_MB", "16MB", "whole number of MiB", id="answer-unit"),
    ],
)


@BAD_VALUES
def test_a_bad_value_is_one_line_that_starts_with_the_variable(
    variable: str, value: str, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({**BASE, variable: value})

    message = str(caught.value)
    assert message.startswith(f"{variable}: ")
    assert says in message
    assert "\n" not in message


def test_a_missing_api_key_says_how_to_provide_it() -> None:
    with pytest.raises(ConfigError, match=r"^RUNPOD_API_KEY: not set; .*create secret"):
        load_config({})


def test_secrets_never_appear_in_errors_or_the_repr() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({"RUNPOD_API_KEY": "rp_live_SECRET key"})
    assert "SECRET" not in str(caught.value)

    with pytest.raises(ConfigError) as bad_url:
        load_config({**BASE, "PROMETHEUS_URL": "ftp://admin:hunter2@prom:9090"})
    assert "hunter2" not in str(bad_url.value)

    config = load_config({**BASE, "PROMETHEUS_URL": "http://admin:hunter2@prom:9090"})
    assert KEY not in repr(config)
    assert "hunter2" not in repr(config)
    assert "hunter2" not in config.prometheus_display
    assert config.prometheus_display.startswith("http://prom:9090")


def test_rpp_run_prints_the_one_line_and_exits_2_without_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rpp", "run"],
        env={"RUNPOD_API_KEY": KEY, "RECONCILE_INTERVAL": "soon", "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "rpp run: RECONCILE_INTERVAL: 'soon' is not a number of seconds; set e.g. 30 or 45s"
    ]
    assert isinstance(load_config(BASE), Config)
