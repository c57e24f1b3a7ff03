"""Log format: JSON lines for machines, structlog's console renderer on a terminal."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from service.logs import configure_logging
from service.settings import SettingsError, load_settings


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_logging():
    saved = structlog.get_config()
    handlers = logging.getLogger().handlers[:]
    yield
    structlog.configure(**saved)
    logging.getLogger().handlers[:] = handlers


def _emit(stream) -> str:
    structlog.contextvars.bind_contextvars(ticket_id="t_1")
    try:
        structlog.get_logger().info("ticket_done", level="green")
    finally:
        structlog.contextvars.unbind_contextvars("ticket_id")
    return stream.getvalue()


def test_a_pipe_gets_json_lines():
    pipe = io.StringIO()
    configure_logging("info", stream=pipe)
    line = json.loads(_emit(pipe))
    assert line["event"] == "ticket_done" and line["ticket_id"] == "t_1"
    assert line["level"] == "info" and line["timestamp"].endswith("Z")


def test_a_terminal_gets_the_console_renderer():
    screen = Terminal()
    configure_logging("info", stream=screen)
    text = _emit(screen)
    with pytest.raises(ValueError):
        json.loads(text)
    assert "ticket_done" in text and "ticket_id" in text and "t_1" in text
    assert "\x1b[" in text  # coloured


@pytest.mark.parametrize(
    ("fmt", "terminal", "is_json"), [("json", True, True), ("console", False, False), ("auto", False, True)]
)
def test_the_setting_forces_a_format(fmt, terminal, is_json):
    stream = Terminal() if terminal else io.StringIO()
    configure_logging("info", fmt, stream=stream)
    text = _emit(stream)
    try:
        json.loads(text)
        parsed = True
    except ValueError:
        parsed = False
    assert parsed is is_json


def test_exceptions_render_in_both_formats_without_a_warning(recwarn):
    for stream in (io.StringIO(), Terminal()):
        configure_logging("info", stream=stream)
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            structlog.get_logger().exception("failed")
        assert "RuntimeError" in stream.getvalue() and "boom" in stream.getvalue()
    assert not [w for w in recwarn if "exc_info" in str(w.message) or "format_exc" in str(w.message)]


def test_triage_log_format_is_a_checked_setting(monkeypatch):
    monkeypatch.setenv("TRIAGE_LOG_FORMAT", "console")
    assert load_settings().log_format == "console"
    monkeypatch.setenv("TRIAGE_LOG_FORMAT", "xml")
    with pytest.raises(SettingsError, match="log_format|TRIAGE_LOG_FORMAT"):
        load_settings()
