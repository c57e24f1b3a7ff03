"""The resident model: one llama.cpp context, a KV prefix cache, and one-token answer readouts.

Nothing is evaluated twice:
- level 1, a *prefix* (chat template head + system context + ticket intro) is evaluated once into
  its own KV sequence and kept there (a few prefixes may be cached, least recently used evicted);
- level 2, each ticket is evaluated once on a sequence copied from the prefix (`llama_memory_seq_cp`
  shares the cells; nothing is recomputed);
- level 3, each question adds only its suffix on top of the ticket: either all questions in one
  `llama_decode` batch as parallel sequences (mode "parallel"), or one after the other on the
  ticket's sequence with a rewind (`llama_memory_seq_rm`, mode "rewind").

The answer position is decoded with embeddings output switched on (pooling NONE) so that the
final hidden state comes out of the same forward pass as the logits. Embeddings stay off for
everything else, because llama.cpp outputs (and projects to the vocabulary) every token of a
batch while embeddings are on.

Intermediate layers come out of the same decode calls through llama.cpp's eval callback
(`cb_eval`): when a `Capture` asks for layers, the callback copies the named layer outputs
(`l_out-N`) as the graph computes them, and the runner keeps the rows it needs: the mean over
the ticket's tokens ("pooled") and the answer positions. No second forward pass is made.

A deadline bounds every call: it is checked between decode calls and, inside a long decode, by
llama.cpp's abort callback, so a slow ticket cannot hold the worker forever.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import structlog
from jinja2.sandbox import ImmutableSandboxedEnvironment

from service.errors import AliasError, DeadlineExceeded, RunnerError

log = structlog.get_logger()

_TICKET_MARK = "\u2063\u2063TRIAGE-STATE\u2063\u2063"
_QUESTION_MARK = "\u2063\u2063TRIAGE-QUESTION\u2063\u2063"
THINK_OPEN = "<think>"
THINK_CLOSE_BLOCK = "<think>\n\n</think>\n\n"  # an empty thinking block, appended when opened


@dataclass
class Prefix:
    """A cached level-1 prefix: its KV sequence and its length in tokens."""

    seq: int
    tokens: tuple[int, ...]

    @property
    def n(self) -> int:
        return len(self.tokens)


@dataclass
class State:
    """A ticket evaluated on top of a prefix (level 2): questions branch from here."""

    prefix: Prefix
    seq: int
    n_past: int  # prefix + ticket tokens in the sequence
    tokens_evaluated: int  # ticket tokens only
    pooled: dict[int, np.ndarray] = field(default_factory=dict)  # layer -> mean over the ticket


@dataclass
class Readout:
    """What one question's answer position gives: logits (vocabulary) and the hidden state."""

    logits: np.ndarray  # float32 (n_vocab,)
    hidden: np.ndarray  # float32 (n_embd,)
    tokens: int  # suffix tokens evaluated for this question (incl. an appended think block)
    thought: bool = False  # the model opened a thinking block; an empty one was appended
    layers: dict[int, np.ndarray] = field(default_factory=dict)  # layer -> state at the answer


@dataclass
class Stats:
    """Counters that prove the caching: the prefix must be evaluated once per context."""

    prefix_evaluations: int = 0
    prefix_tokens: int = 0
    tokens: int = 0  # every token evaluated (prefix, tickets, suffixes, generation)
    decode_calls: int = 0
    aborts: int = 0
    extra: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Capture:
    """Which intermediate layers to read: means over the ticket's tokens, states at answers."""

    pooled: tuple[int, ...] = ()
    answers: tuple[int, ...] = ()

    @property
    def layers(self) -> frozenset[int]:
        return frozenset(self.pooled) | frozenset(self.answers)

    def __bool__(self) -> bool:
        return bool(self.pooled or self.answers)


class _Collector:
    """Receives layer outputs from the eval callback during one llama_decode call.

    `groups` gives, per batch row, the ticket whose mean it adds to (-1: none), `out_rows` the
    rows kept as they are (answer positions); both index the decode call's batch, which
    llama.cpp evaluates as one micro-batch in order (n_ubatch == n_batch, unified KV cache).
    Several tickets share a call when the worker batches them (Runner.open_and_ask_many).
    """

    def __init__(self, capture: Capture, n_embd: int) -> None:
        self.capture = capture
        self.names = {f"l_out-{n}".encode(): n for n in capture.layers}
        self.sums: dict[int, dict[int, np.ndarray]] = {}  # ticket -> layer -> sum over its tokens
        self.counts: dict[int, int] = {}
        self.rows_of: dict[int, np.ndarray] = {}  # ticket -> its rows in the current call
        self.out_rows: list[int] = []
        self.outputs: dict[int, np.ndarray] = {}  # layer -> (len(out_rows), n_embd)
        self.n_embd = n_embd

    def begin(self, groups: np.ndarray, out_rows: list[int]) -> None:
        self.rows_of = {int(g): np.flatnonzero(groups == g) for g in np.unique(groups[groups >= 0])}
        for g, rows in self.rows_of.items():
            self.counts[g] = self.counts.get(g, 0) + len(rows)
        self.out_rows = out_rows
        self.outputs = {}

    def take(self, layer: int, rows: np.ndarray) -> None:
        if layer in self.capture.pooled:
            for g, mine in self.rows_of.items():
                sums = self.sums.setdefault(
                    g, {n: np.zeros(self.n_embd, dtype=np.float64) for n in self.capture.pooled}
                )
                sums[layer] += rows[mine].sum(axis=0, dtype=np.float64)
        if self.out_rows and layer in self.capture.answers:
            self.outputs[layer] = rows[self.out_rows].copy()

    def pooled(self, ticket: int = 0) -> dict[int, np.ndarray]:
        if not self.counts.get(ticket):
            return {}
        return {n: (s / self.counts[ticket]).astype(np.float32) for n, s in self.sums[ticket].items()}


class ChatTemplate:
    """The GGUF's own chat template (tokenizer.chat_template), rendered with jinja2."""

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "") -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loader=jinja2.BaseLoader())
        env.globals["raise_exception"] = _raise_template_error
        env.globals["strftime_now"] = lambda fmt: time.strftime(fmt)
        self.source = source
        self._template = env.from_string(source)
        self._bos = bos_token
        self._eos = eos_token

    def render(self, system: str, user: str) -> str:
        """System + user turn, the assistant turn left open (add_generation_prompt)."""
        return self._template.render(
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            add_generation_prompt=True,
            bos_token=self._bos,
            eos_token=self._eos,
        )

    def layout(self, system: str, intro: str, outro: str) -> tuple[str, str, str]:
        """(head, between, tail): head + STATE + between + QUESTION + tail is the full prompt."""
        text = self.render(system, intro + _TICKET_MARK + outro + _QUESTION_MARK)
        if text.count(_TICKET_MARK) != 1 or text.count(_QUESTION_MARK) != 1:
            raise RunnerError("the chat template does not pass the user content through verbatim")
        head, rest = text.split(_TICKET_MARK)
        between, tail = rest.split(_QUESTION_MARK)
        return head, between, tail


def _raise_template_error(message: str) -> None:
    raise jinja2.TemplateError(message)


_llama = None  # the llama_cpp module, imported on first use (import is slow and loads libllama)
_log_callback = None
_ggml = None  # libggml through ctypes: tensor names and data for the eval callback


class _TensorHead(ctypes.Structure):
    """The leading fields of ggml.h's struct ggml_tensor (type, buffer, ne, nb)."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * 4),
        ("nb", ctypes.c_size_t * 4),
    ]


def _ggml_lib():
    global _ggml
    if _ggml is None:
        from llama_cpp._ggml import libggml

        libggml.ggml_get_name.argtypes = [ctypes.c_void_p]
        libggml.ggml_get_name.restype = ctypes.c_char_p
        libggml.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
        libggml.ggml_backend_tensor_get.restype = None
        _ggml = libggml
    return _ggml


def _lib():
    global _llama, _log_callback
    if _llama is None:
        import llama_cpp

        @llama_cpp.llama_log_callback
        def _quiet(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
            # llama.cpp logs every load step on stderr; keep errors only (GGML_LOG_LEVEL_ERROR=4).
            if level == 4 and text:
                log.warning("llama_cpp", message=text.decode("utf-8", "replace").strip())

        _log_callback = _quiet  # the C side keeps a raw pointer: keep the object alive
        llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        _llama = llama_cpp
    return _llama


def model_layers(model_path: str | Path) -> int:
    """The model's layer count, read from the GGUF's metadata without loading its weights."""
    L = _lib()
    mparams = L.llama_model_default_params()
    mparams.vocab_only = True
    model = L.llama_model_load_from_file(str(model_path).encode(), mparams)
    if not model:
        raise RunnerError(f"llama.cpp could not read {model_path}")
    try:

        def meta(key: str) -> str:
            buf = ctypes.create_string_buffer(256)
            n = L.llama_model_meta_val_str(model, key.encode(), buf, 256)
            return buf.value.decode() if n >= 0 else ""

        count = meta(f"{meta('general.architecture')}.block_count")
        if not count.isdigit():
            raise RunnerError(f"{model_path} records no block_count")
        return int(count)
    finally:
        L.llama_model_free(model)


class Runner:
    """Owns one model and one context; not thread-safe by itself: hold `lock` around a ticket."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_threads: int,
        n_ctx: int = 4096,
        n_batch: int = 512,
        n_seq_max: int = 32,
        max_prefixes: int = 2,
        capture: Capture | None = None,
    ) -> None:
        L = _lib()
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise RunnerError(f"model file not found: {self.model_path}")
        self.lock = threading.RLock()
        self.stats = Stats()
        self.memo: dict = {}  # tokenised layouts, suffixes and alias ids, keyed by their text
        self._deadline: float | None = None
        mparams = L.llama_model_default_params()
        mparams.n_gpu_layers = 0
        self._model = L.llama_model_load_from_file(str(self.model_path).encode(), mparams)
        if not self._model:
            raise RunnerError(f"llama.cpp could not load {self.model_path}")
        self._vocab = L.llama_model_get_vocab(self._model)
        self.n_vocab = int(L.llama_vocab_n_tokens(self._vocab))
        self.n_embd = int(L.llama_model_n_embd_out(self._model))
        cparams = L.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_batch
        cparams.n_ubatch = n_batch
        cparams.n_seq_max = n_seq_max
        cparams.n_threads = n_threads
        cparams.n_threads_batch = n_threads
        cparams.embeddings = False  # switched on only for answer positions (see module doc)
        cparams.pooling_type = L.LLAMA_POOLING_TYPE_NONE
        cparams.kv_unified = True  # one KV buffer: seq_cp shares cells instead of copying them
        cparams.no_perf = True
        self.n_layer = int(L.llama_model_n_layer(self._model))
        self.capture = Capture()
        self.set_capture(capture or Capture())
        self._collector: _Collector | None = None
        # Installed always, so that a hot-loaded calibration artifact can ask for other layers;
        # with nothing to capture it only answers "no" to each tensor of the graph.
        self._eval_cb = L.ggml_backend_sched_eval_callback(self._on_tensor)
        cparams.cb_eval = self._eval_cb
        cparams.cb_eval_user_data = None
        self._ctx = L.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            L.llama_model_free(self._model)
            raise RunnerError(f"llama.cpp could not create a context (n_ctx={n_ctx})")
        self.n_ctx = int(L.llama_n_ctx(self._ctx))
        self.n_batch = n_batch
        self.n_threads = n_threads
        self.n_seq_max = n_seq_max
        self._mem = L.llama_get_memory(self._ctx)
        self._embeddings = False
        self._batch = L.llama_batch_init(n_batch, 0, n_seq_max)
        self._abort_cb = L.ggml_abort_callback(self._should_abort)
        L.llama_set_abort_callback(self._ctx, self._abort_cb, ctypes.c_void_p(0))
        self._max_prefixes = max_prefixes
        self._prefixes: OrderedDict[tuple[int, ...], Prefix] = OrderedDict()
        self._state_seq = max_prefixes  # the ticket's sequence
        self._branch_seqs = list(range(max_prefixes + 1, n_seq_max))  # question sequences
        self.template = ChatTemplate(
            self.meta("tokenizer.chat_template") or "",
            bos_token=self._special_text(L.llama_vocab_bos(self._vocab)),
            eos_token=self._special_text(L.llama_vocab_eos(self._vocab)),
        )
        if not self.template.source:
            raise RunnerError(f"{self.model_path.name} carries no tokenizer.chat_template")
        self._add_bos = bool(L.llama_vocab_get_add_bos(self._vocab))
        think = self.tokenize(THINK_OPEN, special=True)
        self.think_token: int | None = think[0] if len(think) == 1 else None

    # ------------------------------------------------------------------ vocabulary
    def meta(self, key: str) -> str | None:
        L = _lib()
        size = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(size)
            n = L.llama_model_meta_val_str(self._model, key.encode(), buf, size)
            if n < 0:
                return None
            if n < size:
                return buf.raw[:n].decode("utf-8")
            size = n + 1

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Tokens of `text`; `special` parses control-token text (templates only, never tickets)."""
        L = _lib()
        data = text.encode("utf-8")
        cap = len(data) + 16
        buf = (L.llama_token * cap)()
        n = L.llama_tokenize(self._vocab, data, len(data), buf, cap, False, special)
        if n < 0:
            cap = -n
            buf = (L.llama_token * cap)()
            n = L.llama_tokenize(self._vocab, data, len(data), buf, cap, False, special)
        return list(buf[:n])

    def piece(self, token: int, *, special: bool = True) -> str:
        return self._piece_bytes(token, special).decode("utf-8", "replace")

    def _piece_bytes(self, token: int, special: bool) -> bytes:
        L = _lib()
        buf = ctypes.create_string_buffer(64)
        n = L.llama_token_to_piece(self._vocab, token, buf, 64, 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = L.llama_token_to_piece(self._vocab, token, buf, -n, 0, special)
        return buf.raw[:n]

    def detokenize(self, tokens: list[int]) -> str:
        return b"".join(self._piece_bytes(t, False) for t in tokens).decode("utf-8", "replace")

    def _special_text(self, token: int) -> str:
        return self.piece(token) if token >= 0 else ""

    def alias_token(self, alias: str) -> int:
        """The single token that spells `alias`; AliasError if the vocabulary splits it."""
        tokens = self.tokenize(alias)
        if len(tokens) != 1:
            pieces = [self.piece(t) for t in tokens]
            raise AliasError(
                f"answer alias {alias!r} is {len(tokens)} tokens {pieces} in "
                f"{self.model_path.name}; every alias must be exactly one token"
            )
        return tokens[0]

    def prompt_tokens(self, head: str) -> list[int]:
        """Tokens of a rendered template head, with BOS when the model wants one."""
        tokens = self.tokenize(head, special=True)
        bos = _lib().llama_vocab_bos(self._vocab)
        if self._add_bos and bos >= 0 and (not tokens or tokens[0] != bos):
            tokens = [bos] + tokens
        return tokens

    # ------------------------------------------------------------------ decoding
    def _should_abort(self, _data: ctypes.c_void_p) -> bool:
        deadline = self._deadline
        return deadline is not None and time.monotonic() > deadline

    def set_capture(self, capture: Capture) -> None:
        """Read these layers from the next ticket on (RunnerError for a layer out of range)."""
        bad = sorted(n for n in capture.layers if not 0 <= n < self.n_layer - 1)
        if bad:  # the last layer keeps only the output rows; its answer state is `hidden`
            raise RunnerError(
                f"capture layers {bad} outside 0..{self.n_layer - 2} ({self.model_path.name} has {self.n_layer} layers)"
            )
        self.capture = capture

    def _on_tensor(self, tensor: int, ask: bool, _data: ctypes.c_void_p) -> bool:
        """llama.cpp's eval callback: ask=True 'do you want this tensor?', then its data."""
        collector = self._collector
        if collector is None:
            return not ask  # nothing wanted; keep computing
        name = _ggml_lib().ggml_get_name(tensor)
        layer = collector.names.get(name)
        if layer is None:
            return not ask
        if ask:
            return True
        head = _TensorHead.from_address(tensor)
        if head.type != 0:  # GGML_TYPE_F32: layer outputs are float32 on the CPU backend
            raise RunnerError(f"layer output {name!r} has ggml type {head.type}, not F32")
        n_embd, n_rows = int(head.ne[0]), int(head.ne[1])
        rows = np.empty((n_rows, n_embd), dtype=np.float32)
        _ggml_lib().ggml_backend_tensor_get(tensor, rows.ctypes.data, 0, rows.nbytes)
        collector.take(layer, rows)
        return True

    def _set_embeddings(self, on: bool) -> None:
        if on != self._embeddings:
            _lib().llama_set_embeddings(self._ctx, on)
            self._embeddings = on

    def _decode(
        self,
        entries: list[tuple[int, int, Any, bool]],
        *,
        embeddings: bool = False,
        deadline: float | None = None,
        pooled: int = 0,
        groups: np.ndarray | None = None,
    ) -> list[int]:
        """Decode (token, pos, seq, output) entries in n_batch chunks; returns output indices.

        Output indices refer to the last chunk: callers put every output in one final call.
        The first `pooled` entries are the ticket's tokens, whose layer states a capture
        averages; `groups` says instead, per entry, which ticket's mean it adds to (-1: none).
        """
        L = _lib()
        out_index: list[int] = []
        self._set_embeddings(embeddings)
        batch = self._batch
        for start in range(0, len(entries), self.n_batch):
            if deadline is not None and time.monotonic() > deadline:
                raise DeadlineExceeded("deadline passed between decode calls")
            chunk = entries[start : start + self.n_batch]
            out_index = []
            for i, (token, pos, seq, output) in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = pos
                if isinstance(seq, tuple):  # one token shared by several sequences (fused)
                    batch.n_seq_id[i] = len(seq)
                    for k, s in enumerate(seq):
                        batch.seq_id[i][k] = s
                else:
                    batch.n_seq_id[i] = 1
                    batch.seq_id[i][0] = seq
                batch.logits[i] = 1 if output else 0
                if output:
                    out_index.append(i)
            batch.n_tokens = len(chunk)
            if self._collector is not None:
                if groups is None:
                    groups = np.full(len(entries), -1)
                    groups[:pooled] = 0
                self._collector.begin(groups[start : start + len(chunk)], out_index)
            self._deadline = deadline
            try:
                rc = L.llama_decode(self._ctx, batch)
            finally:
                self._deadline = None
            self.stats.decode_calls += 1
            if rc == 2:
                self.stats.aborts += 1
                raise DeadlineExceeded("deadline passed during a decode (aborted)")
            if rc != 0:
                raise RunnerError(f"llama_decode failed with code {rc}")
            self.stats.tokens += len(chunk)
        return out_index

    def _logits(self, index: int) -> np.ndarray:
        ptr = _lib().llama_get_logits_ith(self._ctx, index)
        if not ptr:
            raise RunnerError(f"no logits at batch index {index}")
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def _hidden(self, index: int) -> np.ndarray:
        ptr = _lib().llama_get_embeddings_ith(self._ctx, index)
        if not ptr:
            raise RunnerError(f"no hidden state at batch index {index}")
        return np.ctypeslib.as_array(ptr, shape=(self.n_embd,)).astype(np.float32, copy=True)

    def _rm(self, seq: int, p0: int = -1, p1: int = -1) -> None:
        _lib().llama_memory_seq_rm(self._mem, seq, p0, p1)

    def _pos_max(self, seq: int) -> int:
        return int(_lib().llama_memory_seq_pos_max(self._mem, seq))

    # ------------------------------------------------------------------ level 1: prefixes
    def prefix(self, tokens: list[int]) -> Prefix:
        """The cached prefix for these tokens, evaluated now if it is not cached."""
        key = tuple(tokens)
        cached = self._prefixes.get(key)
        if cached is not None and self._pos_max(cached.seq) == cached.n - 1:
            self._prefixes.move_to_end(key)
            return cached
        if cached is not None:  # its cells were lost (failed decode): evaluate it again
            log.warning("l2_prefix_lost", seq=cached.seq, tokens=cached.n)
            del self._prefixes[key]
        used = {p.seq for p in self._prefixes.values()}
        if len(used) >= self._max_prefixes:
            _, evicted = self._prefixes.popitem(last=False)
            self._rm(evicted.seq)
            used.discard(evicted.seq)
        seq = min(set(range(self._max_prefixes)) - used)
        self._rm(seq)
        prefix = Prefix(seq=seq, tokens=key)
        try:
            self._decode([(t, i, seq, False) for i, t in enumerate(key)])
        except Exception:
            self._rm(seq)
            raise
        self.stats.prefix_evaluations += 1
        self.stats.prefix_tokens += len(key)
        self._prefixes[key] = prefix
        log.info("l2_prefix_evaluated", seq=seq, tokens=len(key))
        return prefix

    def cached_prefix_tokens(self) -> int:
        return sum(p.n for p in self._prefixes.values())

    # ------------------------------------------------------------------ level 2: the state
    def open_state(self, prefix: Prefix, tokens: list[int], deadline: float | None = None) -> State:
        """Evaluate a ticket once on a copy of the prefix sequence."""
        self.close_state()
        seq = self._state_seq
        _lib().llama_memory_seq_cp(self._mem, prefix.seq, seq, -1, -1)
        self._start_capture()
        try:
            self._decode(
                [(t, prefix.n + i, seq, False) for i, t in enumerate(tokens)], deadline=deadline, pooled=len(tokens)
            )
        except Exception:
            self.close_state()
            raise
        return State(
            prefix=prefix, seq=seq, n_past=prefix.n + len(tokens), tokens_evaluated=len(tokens), pooled=self._pooled()
        )

    def _start_capture(self) -> None:
        self._collector = _Collector(self.capture, self.n_embd) if self.capture else None

    def _pooled(self, ticket: int = 0) -> dict[int, np.ndarray]:
        return self._collector.pooled(ticket) if self._collector is not None else {}

    def _answer_layers(self, k: int) -> dict[int, np.ndarray]:
        """Layer states of the k-th output of the last decode call."""
        if self._collector is None:
            return {}
        return {layer: rows[k] for layer, rows in self._collector.outputs.items()}

    def close_state(self) -> None:
        """Drop the ticket and every question branch; the prefixes stay."""
        self._collector = None
        self._rm(self._state_seq)
        for seq in self._branch_seqs:
            self._rm(seq)

    # ------------------------------------------------------------------ level 3: questions
    @property
    def max_branches(self) -> int:
        return len(self._branch_seqs)

    def ask(
        self, state: State, suffixes: dict[str, list[int]], *, mode: str = "parallel", deadline: float | None = None
    ) -> dict[str, Readout]:
        """Read each question's answer position; the state is left as it was."""
        if mode == "parallel":
            return self._ask_parallel(state, suffixes, deadline)
        if mode == "rewind":
            return self._ask_rewind(state, suffixes, deadline)
        raise ValueError(f"mode must be 'parallel' or 'rewind', got {mode!r}")

    def open_and_ask(
        self, prefix: Prefix, tokens: list[int], suffixes: dict[str, list[int]], deadline: float | None = None
    ) -> tuple[State, dict[str, Readout]]:
        """Mode "fused": the ticket and every question body in the same decode calls.

        Each ticket token is evaluated once but belongs to the ticket's sequence and to every
        question's sequence at the same time (n_seq_id > 1), so no seq_cp is needed after it and
        one decode call (and its fixed cost) is saved. The answer positions follow as in
        "parallel". The ticket's sequence stays open for the fallback, like open_state.
        """
        L = _lib()
        if len(suffixes) > len(self._branch_seqs):
            raise RunnerError(
                f"{len(suffixes)} questions but only {len(self._branch_seqs)} parallel sequences (raise n_seq_max)"
            )
        self.close_state()
        names = list(suffixes)
        seqs = dict(zip(names, self._branch_seqs, strict=False))
        owners = (self._state_seq, *seqs.values())
        n_past = prefix.n + len(tokens)
        try:
            for seq in owners:
                L.llama_memory_seq_cp(self._mem, prefix.seq, seq, -1, -1)
            entries: list[tuple[int, int, Any, bool]] = [(t, prefix.n + i, owners, False) for i, t in enumerate(tokens)]
            entries += [(t, n_past + i, seqs[n], False) for n in names for i, t in enumerate(suffixes[n][:-1])]
            self._start_capture()
            self._decode(entries, deadline=deadline, pooled=len(tokens))
            state = State(
                prefix=prefix, seq=self._state_seq, n_past=n_past, tokens_evaluated=len(tokens), pooled=self._pooled()
            )
            out = self._read_answers(suffixes, seqs, n_past, deadline)
        except Exception:
            self.close_state()
            raise
        for seq in seqs.values():
            self._rm(seq)
        return state, out

    def open_and_ask_many(
        self, prefix: Prefix, tickets: list[tuple[list[int], dict[str, list[int]]]], deadline: float | None = None
    ) -> list[tuple[dict[int, np.ndarray], dict[str, Readout]]]:
        """Mode "fused" for several tickets in the same decode calls (cross-ticket batching).

        Each ticket gets one sequence per question, branching from the shared prefix; its tokens
        belong to all of them at once, as in open_and_ask. Every ticket's answer positions are
        read in one final call. No ticket sequence is kept (a ticket that needs the generated
        fallback is asked again alone). Returns, per ticket, its pooled layer means and readouts.
        """
        L = _lib()
        wanted = sum(len(suffixes) for _, suffixes in tickets)
        seq_pool = [self._state_seq, *self._branch_seqs]
        if wanted > len(seq_pool):
            raise RunnerError(f"{wanted} question sequences but only {len(seq_pool)} (raise n_seq_max)")
        self.close_state()
        free = iter(seq_pool)
        seqs = [{name: next(free) for name in suffixes} for _, suffixes in tickets]
        entries: list[tuple[int, int, Any, bool]] = []
        groups: list[int] = []
        for j, (tokens, _) in enumerate(tickets):
            owners = tuple(seqs[j].values())
            entries += [(t, prefix.n + i, owners, False) for i, t in enumerate(tokens)]
            groups += [j] * len(tokens)
        for j, (tokens, suffixes) in enumerate(tickets):
            n_past = prefix.n + len(tokens)
            body = [(t, n_past + i, seqs[j][n], False) for n in suffixes for i, t in enumerate(suffixes[n][:-1])]
            entries += body
            groups += [-1] * len(body)
        last = [
            (suffixes[n][-1], prefix.n + len(tokens) + len(suffixes[n]) - 1, seqs[j][n], True)
            for j, (tokens, suffixes) in enumerate(tickets)
            for n in suffixes
        ]
        try:
            for owned in seqs:
                for seq in owned.values():
                    L.llama_memory_seq_cp(self._mem, prefix.seq, seq, -1, -1)
            self._start_capture()
            self._decode(entries, deadline=deadline, groups=np.asarray(groups))
            pooled = [self._pooled(j) for j in range(len(tickets))]
            idx = self._decode(last, embeddings=True, deadline=deadline)
            out: list[tuple[dict[int, np.ndarray], dict[str, Readout]]] = []
            k = 0
            for j, (tokens, suffixes) in enumerate(tickets):
                readouts = {}
                for n in suffixes:
                    readouts[n] = Readout(
                        self._logits(idx[k]), self._hidden(idx[k]), len(suffixes[n]), layers=self._answer_layers(k)
                    )
                    k += 1
                for n in suffixes:
                    if self._opened_thinking(readouts[n]):
                        pos = prefix.n + len(tokens) + len(suffixes[n])
                        readouts[n] = self._close_thinking(seqs[j][n], pos, readouts[n], deadline)
                out.append((pooled[j], readouts))
            return out
        finally:
            self.close_state()

    def _read_answers(
        self, suffixes: dict[str, list[int]], seqs: dict[str, int], n_past: int, deadline: float | None
    ) -> dict[str, Readout]:
        """Decode each suffix's last token (its answer position) in one batch with embeddings
        on: the logits and the hidden state there, from the same pass. Every other suffix
        token must already be in its sequence, which starts after `n_past` shared tokens."""
        names = list(suffixes)
        last = [(suffixes[n][-1], n_past + len(suffixes[n]) - 1, seqs[n], True) for n in names]
        idx = self._decode(last, embeddings=True, deadline=deadline)
        out = {
            n: Readout(self._logits(i), self._hidden(i), len(suffixes[n]), layers=self._answer_layers(k))
            for k, (n, i) in enumerate(zip(names, idx, strict=True))
        }
        for n in names:
            if self._opened_thinking(out[n]):
                out[n] = self._close_thinking(seqs[n], n_past + len(suffixes[n]), out[n], deadline)
        return out

    def _ask_parallel(self, state: State, suffixes: dict[str, list[int]], deadline: float | None) -> dict[str, Readout]:
        L = _lib()
        if len(suffixes) > len(self._branch_seqs):
            raise RunnerError(
                f"{len(suffixes)} questions but only {len(self._branch_seqs)} parallel sequences (raise n_seq_max)"
            )
        names = list(suffixes)
        seqs = dict(zip(names, self._branch_seqs, strict=False))
        try:
            for name in names:
                self._rm(seqs[name])
                L.llama_memory_seq_cp(self._mem, state.seq, seqs[name], -1, -1)
            body = [(t, state.n_past + i, seqs[n], False) for n in names for i, t in enumerate(suffixes[n][:-1])]
            if body:
                self._decode(body, deadline=deadline)
            return self._read_answers(suffixes, seqs, state.n_past, deadline)
        finally:
            for name in names:
                self._rm(seqs[name])

    def _ask_rewind(self, state: State, suffixes: dict[str, list[int]], deadline: float | None) -> dict[str, Readout]:
        out: dict[str, Readout] = {}
        try:
            for name, suffix in suffixes.items():
                body = [(t, state.n_past + i, state.seq, False) for i, t in enumerate(suffix[:-1])]
                if body:
                    self._decode(body, deadline=deadline)
                (i,) = self._decode(
                    [(suffix[-1], state.n_past + len(suffix) - 1, state.seq, True)], embeddings=True, deadline=deadline
                )
                readout = Readout(self._logits(i), self._hidden(i), len(suffix), layers=self._answer_layers(0))
                if self._opened_thinking(readout):
                    readout = self._close_thinking(state.seq, state.n_past + len(suffix), readout, deadline)
                out[name] = readout
                self._rm(state.seq, state.n_past, -1)
        finally:
            self._rm(state.seq, state.n_past, -1)
        return out

    def _opened_thinking(self, readout: Readout) -> bool:
        return self.think_token is not None and int(np.argmax(readout.logits)) == self.think_token

    def _close_thinking(self, seq: int, pos: int, readout: Readout, deadline: float | None) -> Readout:
        """The model wants to think first: append an empty thinking block, read after it."""
        block = self.tokenize(THINK_CLOSE_BLOCK, special=True)
        if block[:1] != [self.think_token]:
            block = [self.think_token] + block
        if block[:-1]:
            self._decode([(t, pos + i, seq, False) for i, t in enumerate(block[:-1])], deadline=deadline)
        (i,) = self._decode([(block[-1], pos + len(block) - 1, seq, True)], embeddings=True, deadline=deadline)
        return Readout(
            self._logits(i), self._hidden(i), readout.tokens + len(block), True, layers=self._answer_layers(0)
        )

    # ------------------------------------------------------------------ generation
    def generate(
        self, state: State, suffix: list[int], grammar: str, *, max_tokens: int = 96, deadline: float | None = None
    ) -> tuple[str, int]:
        """Greedy generation under a GBNF grammar on a branch of the state: (text, tokens)."""
        L = _lib()
        seq = self._branch_seqs[0]
        chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
        gram = L.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root")
        if not gram:
            L.llama_sampler_free(chain)
            raise RunnerError("llama.cpp rejected the grammar")
        L.llama_sampler_chain_add(chain, gram)
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_greedy())
        evaluated = 0
        self._collector = None  # generated tokens are not features
        try:
            self._rm(seq)
            L.llama_memory_seq_cp(self._mem, state.seq, seq, -1, -1)
            pos = state.n_past
            entries = [(t, pos + i, seq, i == len(suffix) - 1) for i, t in enumerate(suffix)]
            self._decode(entries[:-1], deadline=deadline)
            self._decode(entries[-1:], deadline=deadline)
            evaluated += len(suffix)
            pos += len(suffix)
            out: list[int] = []
            for _ in range(max_tokens):
                token = int(L.llama_sampler_sample(chain, self._ctx, -1))
                if L.llama_vocab_is_eog(self._vocab, token):
                    break
                out.append(token)
                self._decode([(token, pos, seq, True)], deadline=deadline)
                evaluated += 1
                pos += 1
            return self.detokenize(out), evaluated
        finally:
            L.llama_sampler_free(chain)
            self._rm(seq)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        L = _lib()
        if getattr(self, "_ctx", None):
            L.llama_batch_free(self._batch)
            L.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_model", None):
            L.llama_model_free(self._model)
            self._model = None

    def __del__(self) -> None:  # a worker keeps one Runner for its life; tests create a few
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may already be gone
            pass
