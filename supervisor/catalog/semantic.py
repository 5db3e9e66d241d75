"""Semantic retrieval over a view's tools: texts to embed, the embedding models, a vector index (issue 48).

The lexical index (``catalog.search``) finds a tool whose words the user used;
this one finds a tool whose *meaning* is near the request ("cut release 2.4.0"
for a fix version), and ``catalog.fusion`` merges the two rankings.

What is embedded, per tool (``embedding_text``): the server's name and what it
does (its ``instructions`` or a description the settings give), the tool's name
split into words, its title, and the first sentence of its description. The
server's text is what tells near-duplicates apart (two browsers, three git
hosts). The arguments and the rest of the description stay in the lexical
index only: a tool's first sentence says what it is for, and the usage notes
and argument texts after it pull its vector toward every tool that takes a
path or a page number. ``bench p7`` measured it on its even-numbered requests
(the odd ones held out; fused MRR@5, both halves, WordLlama / MiniLM-L6):

==========================================  =============  =============
embedded text                               WordLlama      MiniLM-L6
==========================================  =============  =============
all of it, arguments too (before)           0.520 / 0.513  0.632 / 0.632
without the arguments                       0.586 / 0.546  0.656 / 0.659
first sentence, no arguments (this)         0.589 / 0.561  0.668 / 0.646
==========================================  =============  =============

(even / odd halves, at the fusion's weight ``fusion.SEMANTIC_WEIGHT``.)

The models (``load_embedder``), all loaded from files on this machine, never
from a hub (nothing is downloaded at run time):

==========================  ======================================================
``model``                   what is loaded
==========================  ======================================================
``wordllama`` (default)     WordLlama's 256-d static embedding, whose weights and
                            tokenizer ship in the ``wordllama`` wheel (numpy only)
``bert``                    a BERT-family sentence model, no torch: onnxruntime or
                            numpy (``catalog.semantic_bert``): the directory ``path``, or
                            without it all-MiniLM-L6-v2 as the ``search-minilm``
                            extra's package ships it
``model2vec``               a model2vec static model from the directory ``path``
``sentence-transformers``   a sentence-transformers model directory at ``path``
                            (e.g. all-MiniLM-L6-v2; needs torch)
==========================  ======================================================

Every library is imported inside ``load_embedder`` only: without the ``search``
extra this module still imports (the sidecar's import time and RSS do not grow),
and the loader raises ``SemanticUnavailable`` saying what to install.

Concurrency: nothing here awaits. ``load_embedder`` caps numpy's BLAS at one
thread (before numpy's first import), so a search never has BLAS threads
competing with the trio loop for the cores. ``load_embedder`` and ``Embedder.embed`` are
slow and blocking (file reads, numpy); ``catalog.semantic_engine`` runs them in a
worker thread under its one-slot limiter, never on the trio loop. A
``VectorIndex`` is built whole and never changed (a rebuild is a new object
swapped in by one assignment); its ``search`` is a read-only matrix product, so
a thread may build one while the loop searches the previous one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from supervisor.catalog.naming import tool_part
from supervisor.catalog.registry import RegisteredTool

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]
else:
    Vectors = Any

MODELS: Final = ("wordllama", "bert", "model2vec", "sentence-transformers")
"""What ``[supervisor.search] model`` may name (``path`` is required for all but ``wordllama`` and ``bert``)."""
DEFAULT_MODEL: Final = "wordllama"
PACKAGED: Final = ("wordllama", "bert")
"""The models whose files a package ships (the ``search`` and ``search-minilm`` extras): ``path`` is optional."""
_REQUIRES: Final = {
    "wordllama": "wordllama",
    "bert": "safetensors",
    "model2vec": "model2vec",
    "sentence-transformers": "sentence_transformers",
}
_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
TEXT_MAX_CHARS: Final = 1_000
"""A tool's text is cut here (a first sentence may be a paragraph with no full stop)."""
ABOUT_MAX_CHARS: Final = 200
"""What ``about_line`` keeps of a server's own words: its first sentence, at most this long."""


class SemanticUnavailable(Exception):
    """The semantic index cannot run here: the extra is not installed, or the model could not be loaded."""


class Embedder(Protocol):
    """A loaded model: turns texts into unit-length rows (cosine similarity is a dot product)."""

    @property
    def model_id(self) -> str:
        """Names the model and its files; a cached vector is reused only for the same id."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One unit-length float32 row per text. Blocking: call it from a worker thread."""
        ...


def words_of(name: str) -> str:
    """A tool's name as words: ``listMergeRequests`` / ``list_merge_requests`` → "list Merge Requests"."""
    return " ".join(_NAME_WORDS.findall(name))


def about_line(description: str | None, instructions: str | None) -> str:
    """One line of what a server says it does: its description, else its instructions; their first sentence.

    Instructions can run to pages of usage notes for the model; their first
    sentence is what names the server's domain, and what tells two servers
    with near-identical tools apart.
    """
    return first_sentence(description or instructions or "")[:ABOUT_MAX_CHARS]


def first_sentence(text: str) -> str:
    """``text``'s first sentence, its whitespace made single spaces (all of it if no sentence ends)."""
    return _SENTENCE_END.split(" ".join(text.split()), maxsplit=1)[0]


def embedding_text(entry: RegisteredTool, about: Mapping[str, str] | None = None) -> str:
    """What is embedded for ``entry``: server, what the server does, name in words, title, first sentence."""
    tool = entry.shown
    about_server = (about or {}).get(entry.owner, "")
    name = tool_part(entry.key, entry.owner)
    parts = [f"{entry.owner}: {about_server}".strip() if about_server else entry.owner, words_of(name)]
    if tool.title:
        parts.append(tool.title)
    if tool.description:
        parts.append(first_sentence(tool.description))
    return ". ".join(part for part in parts if part)[:TEXT_MAX_CHARS]


def text_key(model_id: str, text: str) -> str:
    """A cached vector's key: the SHA-256 of the model's id and the embedded text (hex, 32 characters kept)."""
    return hashlib.sha256(f"{model_id}\0{text}".encode()).hexdigest()[:32]


def available(model: str = DEFAULT_MODEL) -> str | None:
    """None if ``model``'s library is importable; else what to install (``check`` says it; nothing is imported)."""
    module = _REQUIRES.get(model)
    if module is None:
        return f"unknown model {model!r} (one of {', '.join(MODELS)})"
    if importlib.util.find_spec("numpy") is None or importlib.util.find_spec(module) is None:
        extras = {"wordllama": "search", "bert": "search-minilm"}
        extra = f"'trio-mcp-supervisor[{extras[model]}]'" if model in extras else f"{model} (and its model's needs)"
        return f"{module} is not installed: pip install {extra}"
    return None


def load_embedder(model: str = DEFAULT_MODEL, path: str | None = None) -> Embedder:
    """Load ``model`` from this machine's files (blocking: seconds for a transformer; run it in a thread).

    Raises:
        SemanticUnavailable: the library is missing, ``path`` is missing or wrong, or loading failed.
    """
    if model in MODELS and model not in PACKAGED and not path:
        raise SemanticUnavailable(f"model {model!r} needs 'path': a model directory on this machine")
    missing = available(model)
    if missing is not None:
        raise SemanticUnavailable(missing)
    # One BLAS thread: a query's matrix product is ~0.1 ms on one core, and OpenBLAS's own threads spinning
    # beside the sidecar's loop on a busy 2-core box made it ~8 ms (bench p7). Effective only before numpy's
    # first import, which in the sidecar is this loader's (nothing else imports numpy).
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")
    if path is not None and not Path(path).expanduser().exists():
        raise SemanticUnavailable(f"the model path {path!r} does not exist")
    try:
        if model == "wordllama":
            return _WordLlama.load(path)
        if model == "bert":
            from supervisor.catalog.semantic_bert import load_bert  # noqa: PLC0415 - numpy and tokenizers

            bert: Embedder = load_bert(path)
            return bert
        if model == "model2vec":
            return _Model2Vec.load(str(Path(path or "").expanduser()))
        return _SentenceTransformer.load(str(Path(path or "").expanduser()))
    except SemanticUnavailable:
        raise
    except Exception as exc:  # a library's own errors: many kinds, one meaning here
        raise SemanticUnavailable(f"could not load the {model} model: {exc}") from exc


def unit_rows(rows: Any) -> Vectors:
    """``rows`` as a contiguous float32 matrix of unit-length rows (a zero row stays zero)."""
    import numpy as np  # noqa: PLC0415 - the search extra only

    matrix = np.asarray(rows, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: Vectors = np.ascontiguousarray(matrix / norms, dtype=np.float32)
    return unit


@dataclass(frozen=True, slots=True)
class _WordLlama:
    """WordLlama (l2_supercat, 256-d): weights and tokenizer from the wheel's own folders, or ``path`` for others."""

    model: Any
    model_id: str

    @classmethod
    def load(cls, path: str | None) -> _WordLlama:
        import wordllama  # type: ignore[import-untyped,unused-ignore]  # noqa: PLC0415 - the search extra only
        from wordllama import WordLlama  # type: ignore[import-untyped,unused-ignore]  # noqa: PLC0415

        # The wheel ships weights/l2_supercat_256.safetensors and tokenizers/l2_supercat_tokenizer_config.json;
        # as a cache_dir its folder is where WordLlama looks for both, and disable_download keeps it offline
        # (its own lookup in the package lacks the tokenizer: it looks in "tokenizer/", not "tokenizers/").
        folder = Path(path).expanduser() if path else Path(wordllama.__file__).parent
        model = WordLlama.load(cache_dir=folder, disable_download=True)
        version = getattr(wordllama, "__version__", "?")
        return cls(model, f"wordllama-{version}-l2_supercat_256@{folder}")

    def embed(self, texts: Sequence[str]) -> Vectors:
        return unit_rows(self.model.embed(list(texts), norm=True))


@dataclass(frozen=True, slots=True)
class _Model2Vec:
    """A model2vec ``StaticModel`` from a local directory (``from_pretrained`` on a path reads no hub)."""

    model: Any
    model_id: str

    @classmethod
    def load(cls, path: str) -> _Model2Vec:
        from model2vec import StaticModel  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415 - optional

        return cls(StaticModel.from_pretrained(path), f"model2vec@{path}")

    def embed(self, texts: Sequence[str]) -> Vectors:
        return unit_rows(self.model.encode(list(texts)))


@dataclass(frozen=True, slots=True)
class _SentenceTransformer:
    """A sentence-transformers model directory, on the CPU, never reaching for a hub."""

    model: Any
    model_id: str

    @classmethod
    def load(cls, path: str) -> _SentenceTransformer:
        from sentence_transformers import (  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415 - optional
            SentenceTransformer,
        )

        return cls(SentenceTransformer(path, device="cpu", local_files_only=True), f"sentence-transformers@{path}")

    def embed(self, texts: Sequence[str]) -> Vectors:
        return unit_rows(self.model.encode(list(texts), batch_size=64, normalize_embeddings=True))


class VectorIndex:
    """Unit vectors of a fixed list of tools; ``search`` ranks them by cosine similarity to a query's vector."""

    __slots__ = ("_entries", "_matrix")

    def __init__(self, entries: Sequence[RegisteredTool], matrix: Vectors) -> None:
        if len(entries) != matrix.shape[0]:
            raise ValueError(f"{len(entries)} tools but {matrix.shape[0]} vectors")
        self._entries = list(entries)
        self._matrix = matrix

    def __len__(self) -> int:
        return len(self._entries)

    def search(self, query: Vectors, limit: int) -> list[tuple[RegisteredTool, float]]:
        """The ``limit`` nearest tools to the unit row ``query``, nearest first (ties: the earlier position)."""
        import numpy as np  # noqa: PLC0415 - the search extra only

        count = len(self._entries)
        if limit <= 0 or count == 0:
            return []
        scores = self._matrix @ query.reshape(-1)
        best = np.argpartition(-scores, limit - 1)[:limit] if limit < count else np.arange(count)
        ordered = sorted(best.tolist(), key=lambda index: (-float(scores[index]), index))
        return [(self._entries[index], float(scores[index])) for index in ordered]


__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "Embedder",
    "SemanticUnavailable",
    "VectorIndex",
    "available",
    "embedding_text",
    "first_sentence",
    "load_embedder",
    "text_key",
    "unit_rows",
    "words_of",
]
