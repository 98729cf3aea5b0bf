"""Shared pieces of the benchmarks: synthetic text and corpora, percentiles, a short
socket directory, memoryd as a subprocess, and the bare-FTS5 baselines.

Standard library plus memoryd's own code only. Run the scripts from the repo root:
`.venv/bin/python bench/<script>.py` (they put the repo root on sys.path themselves).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# gitignored: corpora, built stores, logs; MEMORYD_BENCH_OUT puts them elsewhere (a 1M-unit
# store built once outside the tree, e.g. /work/bench-data, and reused by every worktree)
OUT = Path(os.environ.get("MEMORYD_BENCH_OUT") or ROOT / "bench" / "out")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memoryd.client import ApiError, DaemonNotRunning, MemorydClient  # noqa: E402

# Bump when the generator changes so cached corpora and stores are rebuilt.
# 2: words drawn through a sampling table (Zipf unchanged, 20x faster); one seed per file.
GEN_VERSION = 2

# --------------------------------------------------------------------------------------
# numbers


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0..100), linear between closest ranks (numpy's default)."""
    if not values:
        return math.nan
    s = sorted(values)
    k = (len(s) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"n": len(values), "p50": percentile(values, 50), "p90": percentile(values, 90),
            "p99": percentile(values, 99), "max": max(values) if values else math.nan,
            "mean": statistics.fmean(values) if values else math.nan}


def ratio(a: float, b: float) -> str:
    if not b or math.isnan(a) or math.isnan(b):
        return "n/a"
    return f"{a / b:.2f}x"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


def process_times(cmd: list[str], runs: int, env: dict[str, str] | None = None
                  ) -> list[float]:
    """Wall time of `cmd` as a fresh process, `runs` times (seconds; output discarded)."""
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        out.append(time.perf_counter() - t0)
    return out


def table(rows: list[list[str]], header: list[str]) -> str:
    cols = [header, *rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(header))]
    line = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths, strict=True)))
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def machine() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    return (f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, "
            f"{os.cpu_count()} cpus, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


# --------------------------------------------------------------------------------------
# synthetic text
#
# English: a Zipf-distributed vocabulary whose head is real English and agent/programming
# words (in rough frequency order) and whose tail is pseudo-words that behave like
# identifiers and project names. Chinese: a list of common two- to four-character words.
# Tool output: log lines, test output and code.

_FUNCTION_WORDS = """the to and of a in is it that for you this i we on with be as are not can
have will if or but at by from so do an was my me what all there your which one they
just should need when then also now here how use make like would about could some more
no only other into than them out its any new see sure get let first time up may these
been has were had same each our because yes want still over before after where does""".split()

_COMMON_WORDS = """file test function error code data change run value line table query
database server user request response config type string list return class method check
update fix build output input path version module import call result field key name
number index model issue problem step message log debug memory session search system
service cache client api schema migration column row read write commit branch merge
deploy release process thread async task queue event handler loop timeout retry limit
batch job worker script command option flag default setting environment variable
package dependency install library framework project repository directory folder
document text format parse json yaml csv http url endpoint route token auth login
password permission access role group account email notification report metric
performance latency throughput benchmark profile trace stack exception warning failure
success status state transaction lock index cursor offset size count total average
minimum maximum range filter sort order group join select insert delete create drop
alter view trigger constraint primary foreign unique null boolean integer float date
timestamp timezone format encoding unicode character byte buffer stream socket port
host network connection proxy certificate secure encrypt decrypt hash signature verify
validate sanitize escape render template component layout style theme color font image
upload download storage bucket object blob backup restore snapshot replica cluster node
container docker kubernetes pod volume mount image registry pipeline workflow action
trigger schedule cron monitor alert dashboard graph chart widget button form modal page
screen mobile browser frontend backend middleware plugin extension adapter wrapper
interface abstract concrete instance singleton factory builder observer strategy
pattern refactor rename extract inline move split combine simplify optimize improve
reduce increase enable disable toggle feature experiment rollout rollback hotfix patch
regression bug crash leak deadlock race condition flaky intermittent reproduce
investigate root cause analysis summary review approve reject comment suggestion
question answer explain describe implement design architecture proposal decision
tradeoff constraint requirement specification scope estimate deadline priority
milestone sprint ticket backlog roadmap planning meeting discussion feedback customer
team owner maintainer contributor reviewer tester developer engineer manager""".split()

_RARER_WORDS = """idempotent memoization serialization deserialization backpressure
debounce throttle coalesce reconcile tombstone compaction vacuum checkpoint journal
fsync mmap inode symlink hardlink glob regex tokenizer stemmer bigram trigram ngram
embedding vector cosine similarity ranking relevance bm25 heuristic fallback sentinel
invariant precondition postcondition assertion mock stub fixture parametrize coverage
mutation fuzzing property shrink seed deterministic nondeterministic monotonic clock
skew drift jitter backoff exponential circuit breaker bulkhead quorum consensus raft
paxos gossip sharding partition rebalance hotspot tenant isolation sandbox seccomp
capability namespace cgroup oom swap pagecache readahead prefetch eviction lru lfu
arena allocator fragmentation alignment endianness varint protobuf avro parquet arrow
columnar rowgroup dictionary bitmap bloom hyperloglog reservoir sampling quantile
histogram percentile outlier anomaly seasonality forecast regression classifier
tokenization lemmatization transliteration diacritics normalization collation locale
codepoint grapheme surrogate utf8 latin1 mojibake byteorder checksum crc32 blake2
sha256 hmac nonce salt pepper keyring keychain vault rotation expiry revocation
oauth openid saml jwt cookie csrf cors preflight websocket longpoll sse grpc graphql
thrift rest hateoas pagination cursorless keyset watermark cdc debezium kafka pulsar
rabbitmq nats redis memcached etcd zookeeper consul envoy nginx haproxy traefik
systemd launchd supervisor daemon pidfile sighup sigterm sigkill zombie orphan reaper
""".split()

_CJK_WORDS = """数据 数据库 迁移 错误 配置 部署 测试 用户 文件 服务器 接口 查询 索引 缓存 日志
性能 内存 线程 进程 网络 请求 响应 版本 更新 修复 问题 功能 模块 代码 函数 变量 参数 返回
结果 异常 超时 重试 队列 任务 事件 监控 报警 权限 认证 登录 密码 账号 安全 加密 备份
恢复 快照 集群 节点 容器 镜像 仓库 分支 合并 提交 发布 回滚 环境 依赖 安装 脚本 命令
选项 默认 设置 目录 路径 格式 编码 字符 中文 搜索 分词 排序 过滤 分页 统计 报告 分析
优化 重构 设计 架构 方案 需求 文档 会议 讨论 反馈 客户 团队 项目 计划 进度 上线 下线
调试 断点 堆栈 崩溃 泄漏 死锁 并发 异步 同步 回调 事务 锁定 表格 字段 主键 外键 约束
会话 消息 模型 提示 上下文 记忆 摘要 总结 检索 向量 嵌入 相似 召回 排名 评估 基准
今天 明天 已经 可以 需要 应该 如果 因为 所以 但是 然后 我们 你们 他们 这个 那个 什么
怎么 为什么 没有 不是 一下 一个 现在 之前 之后 时候 看看 试试 帮我 谢谢 好的""".split()

_CJK_ENGLISH = ("Python", "SQLite", "FTS5", "API", "JSON", "commit", "pytest", "Docker",
                "memoryd", "bug", "PR", "CI", "token", "schema", "Redis", "Linux")

_SYLLABLES = ("ka ri to mo na se lu vi pe do ra zu ne ki so ta me ho gu ba fi lo "
              "ve ni sa ku te mi yo da re bo chi shi tsu qua ex on an el ar in or "
              "us um is ix op ul ev ad")

_PUNCT = (".", ".", ".", ".", "?", "!", ":", ";")
_TOOLS = ("bash", "read_file", "write_file", "edit", "grep", "glob", "web_fetch", "run_tests")


class Zipf:
    """Draws values of a fixed discrete distribution in bulk: a table of 2**21 slots in
    which each value holds round(p * 2**21) of them (at least one), indexed by random
    bytes. One C call for the bytes and one comprehension per batch, instead of a
    random() and a bisect per draw (`random.choices` with weights); the rounding moves a
    value's probability by at most 2**-22."""

    BITS = 21

    def __init__(self, values: Sequence[str], weights: Sequence[float]) -> None:
        n = 1 << self.BITS
        total = sum(weights)
        counts = [max(1, round(w / total * n)) for w in weights]
        counts[0] += n - sum(counts)  # the most frequent value absorbs the rounding
        self.table = [v for v, c in zip(values, counts, strict=True) for _ in range(c)]
        self.shift = 32 - self.BITS

    def draw(self, rng: random.Random, k: int) -> list[str]:
        t, sh = self.table, self.shift
        return [t[i >> sh] for i in array("I", rng.randbytes(4 * k))]


class TextGen:
    """Deterministic synthetic agent-transcript text."""

    def __init__(self, seed: int = 1, vocab: int = 40000, zipf_s: float = 1.2) -> None:
        rng = random.Random(seed)
        words = list(dict.fromkeys(_FUNCTION_WORDS + _COMMON_WORDS + _RARER_WORDS))
        self.n_real = len(words)
        seen = set(words)
        syll = _SYLLABLES.split()
        while len(words) < vocab:
            w = "".join(rng.choice(syll) for _ in range(rng.randint(2, 4)))
            if rng.random() < 0.15:
                w += str(rng.randint(0, 99))
            if w not in seen:
                seen.add(w)
                words.append(w)
        self.words = words
        self.zipf = Zipf(words, [1.0 / (r + 2.7) ** zipf_s for r in range(len(words))])
        self.cjk = _CJK_WORDS
        self.cjk_zipf = Zipf(_CJK_WORDS, [1.0 / (r + 3.0) for r in range(len(_CJK_WORDS))])
        # word tiers for queries, by frequency rank
        nf = len(_FUNCTION_WORDS)
        self.head = words[nf: nf + 120]  # common programming words
        self.mid = words[nf + 120: self.n_real]  # rarer real words
        self.tail = words[self.n_real + 2000:]  # identifier-like, rare
        self._w_log, self._w_test, self._w_code = words[100:8000], words[100:4000], words[60:3000]

    # -- messages ------------------------------------------------------------------------

    def english(self, rng: random.Random, chars: int) -> str:
        """Sentences of 5-18 Zipf words; 12% end in an identifier call, 4% in a path."""
        k = max(6, chars // 6)
        ws = self.zipf.draw(rng, k + 24)
        extra = ws[k:]  # identifier parts
        del ws[k:]
        bs = rng.randbytes(k // 5 + 2)  # one byte per sentence: its length and its end
        mid, tests = self.mid, self._w_test
        out: list[str] = []
        i = j = 0
        while i < k:
            b = bs[j]
            n = 5 + b % 14
            s = " ".join(ws[i: i + n])
            r = rng.random()
            if r < 0.12 and len(extra) >= 2:
                s += f" `{extra.pop()}_{extra.pop()}()`"
            elif r < 0.164:
                x = int(r * 1e12)
                s += f" in src/{mid[x % len(mid)]}/{tests[x // 1024 % len(tests)]}.py"
            out.append(s[:1].upper() + s[1:] + _PUNCT[b >> 5])
            i += n
            j += 1
        return " ".join(out)[:chars]

    def chinese(self, rng: random.Random, chars: int) -> str:
        ws = self.cjk_zipf.draw(rng, chars // 2 + 8)
        bs = rng.randbytes(len(ws) // 4 + 2)
        out: list[str] = []
        n = i = j = 0
        while n < chars:
            b = bs[j % len(bs)]
            k = 4 + b % 9
            part = ws[i: i + k] if i + k <= len(ws) else self.cjk_zipf.draw(rng, k)
            if b & 0x80 and b & 0x50:  # 3 in 8 runs hold an English word
                at = b % len(part)
                part = [*part[:at], f" {_CJK_ENGLISH[b % 16]} ", *part[at:]]
            s = "".join(part) + "，。。？！"[(b >> 4) % 5]
            out.append(s)
            n += len(s)
            i += k
            j += 1
        return "".join(out)

    def tool_output(self, rng: random.Random, chars: int) -> str:
        kind = rng.random()
        lines: list[str] = []
        n = 0
        while n < chars:
            if kind < 0.4:
                w = rng.choices(self._w_log, k=3)
                s = (f"2025-0{rng.randint(1, 9)}-{rng.randint(10, 28)}T{rng.randint(10, 23)}:"
                     f"{rng.randint(10, 59)}:{rng.randint(10, 59)}Z "
                     f"{rng.choice(('INFO', 'INFO', 'DEBUG', 'WARN', 'ERROR'))} "
                     f"{w[0]}[{rng.randint(100, 9999)}] {w[1]} {w[2]} id={rng.getrandbits(32):08x} "
                     f"took {rng.randint(1, 900)}ms")
            elif kind < 0.7:
                w = rng.choices(self._w_test, k=2)
                s = (f"tests/test_{w[0]}.py::test_{w[1]}_{rng.randint(1, 40)} "
                     f"{rng.choice(('PASSED', 'PASSED', 'PASSED', 'FAILED', 'SKIPPED'))}"
                     f" [{rng.randint(1, 99)}%]")
            else:
                w = rng.choices(self._w_code, k=4)
                s = (f"{' ' * 4 * rng.randint(0, 3)}def {w[0]}_{w[1]}(self, {w[2]}: str) -> "
                     f"{w[3].capitalize()}:" if rng.random() < 0.2 else
                     f"{' ' * 4 * rng.randint(1, 4)}{w[0]} = self.{w[1]}({w[2]}, {w[3]}=None)")
            lines.append(s)
            n += len(s) + 1
        return "\n".join(lines)

    def message(self, rng: random.Random, role: str) -> str:
        """One message of 200-2000 characters (user messages skew shorter); 5% Chinese."""
        hi = 900 if role == "user" else 2000
        chars = rng.randint(200, hi)
        if rng.random() < 0.05:
            zh = self.chinese(rng, chars // 3)  # CJK is ~3x denser than English
            return zh if rng.random() < 0.5 else self.english(rng, chars // 2) + "\n\n" + zh
        return self.english(rng, chars)

    def lines(self, rng: random.Random, n: int, prefix: str,
              t0: float = 1.74e9) -> Iterator[dict[str, Any]]:
        """`n` generic-JSONL lines: alternating user/assistant messages, about 2% of them
        an assistant tool call followed by a long tool result (2-16 KB)."""
        j = 0
        ts = t0
        while j < n:
            ts += rng.uniform(1, 90)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + "Z"
            if rng.random() < 0.01 and j + 2 <= n:
                cid = f"call_{prefix}_{j}"
                tool = rng.choice(_TOOLS)
                arg = {"command": f"pytest -x tests/test_{rng.choice(self.mid)}.py"} \
                    if tool == "bash" else {"path": f"src/{rng.choice(self.mid)}.py"}
                yield {"role": "assistant", "content": "", "timestamp": stamp,
                       "tool_calls": [{"id": cid, "type": "function", "function": {
                           "name": tool, "arguments": json.dumps(arg)}}]}
                yield {"role": "tool", "tool_call_id": cid, "timestamp": stamp,
                       "content": self.tool_output(rng, rng.randint(2000, 16000))}
                j += 2
                continue
            role = "user" if j % 2 == 0 else "assistant"
            yield {"role": role, "content": self.message(rng, role), "id": f"{prefix}:{j}",
                   "timestamp": stamp}
            j += 1

    # -- queries -------------------------------------------------------------------------

    def queries(self, rng: random.Random, n: int) -> list[tuple[str, str, str]]:
        """(class, query, mode): ~65% 1-4 word English OR queries mixing common, rarer and
        identifier-like words, ~20% 2-3 word AND queries, ~15% Chinese words."""
        out = []
        for _ in range(n):
            r = rng.random()
            if r < 0.65:
                k = rng.choice((1, 1, 2, 2, 2, 3, 3, 4))
                ws = [rng.choice(rng.choices((self.head, self.mid, self.tail), (4, 4, 2))[0])
                      for _ in range(k)]
                out.append((f"en-or-{k}w", " ".join(ws), "or"))
            elif r < 0.85:
                k = rng.choice((2, 2, 3))
                ws = [rng.choice(self.head if i == 0 else rng.choice((self.head, self.mid)))
                      for i in range(k)]
                out.append((f"en-and-{k}w", " ".join(ws), "and"))
            else:
                two = [w for w in self.cjk if len(w) == 2]
                q = rng.choice(two) if rng.random() < 0.7 else " ".join(rng.sample(two, 2))
                out.append(("zh", q, "or"))
        return out


# --------------------------------------------------------------------------------------
# corpus on disk


@dataclass
class CorpusInfo:
    path: str
    files: int
    lines: int
    bytes: int
    seed: int


_WORKER_GEN: list[TextGen] = []


def _init_worker(seed: int) -> None:
    _WORKER_GEN[:] = [TextGen(seed)]


def _session_jsonl(job: tuple[int, int, int, str]) -> str:
    seed, n, lines, prefix = job
    rng = random.Random(f"{seed}:{n}")  # one seed per file: any file, in any process
    return "".join([json.dumps(obj, ensure_ascii=False) + "\n"
                    for obj in _WORKER_GEN[0].lines(rng, lines, prefix)])


def jsonl_texts(seed: int, jobs: Sequence[tuple[int, int, str]],
                procs: int | None = None) -> Iterator[str]:
    """The JSONL text of each (file number, lines, id prefix) in `jobs`, in order,
    generated by `procs` worker processes (default: the CPUs); the same text whatever
    the number of processes."""
    import multiprocessing

    procs = procs or min(len(jobs), os.cpu_count() or 1)
    work = [(seed, n, lines, prefix) for n, lines, prefix in jobs]
    if procs <= 1:
        _init_worker(seed)
        yield from map(_session_jsonl, work)
        return
    with multiprocessing.get_context("fork").Pool(procs, _init_worker, (seed,)) as pool:
        yield from pool.imap(_session_jsonl, work, chunksize=1)


def corpus(files: int, lines: int, seed: int = 1, *, base: Path | None = None,
           log=print) -> CorpusInfo:
    """A generic-JSONL corpus of `files` files × `lines` lines under
    bench/out/corpus/, cached by its parameters (generated once, then reused)."""
    base = base or OUT / "corpus"
    key = f"g{GEN_VERSION}-{files}x{lines}-s{seed}"
    d, meta = base / key, base / f"{key}.json"
    if meta.exists() and d.is_dir():
        return CorpusInfo(**json.loads(meta.read_text()))
    shutil.rmtree(d, ignore_errors=True)
    t0 = time.perf_counter()
    log(f"generating corpus {key} ({files * lines:,} lines) ...")
    total = 0
    texts = jsonl_texts(seed, [(i, lines, f"f{i}") for i in range(files)])
    for i, text in enumerate(texts):
        sub = d / f"proj{i % 13:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        data = text.encode()
        (sub / f"session-{i:04d}.jsonl").write_bytes(data)
        total += len(data)
    info = CorpusInfo(str(d), files, files * lines, total, seed)
    meta.write_text(json.dumps(asdict(info)))
    log(f"  generated in {time.perf_counter() - t0:.1f}s: {total / 1e6:.0f} MB")
    return info


def corpus_options(p: Any) -> None:
    """The backfill benches' corpus size: `--files` × `--lines`, `--quick` for 100 × 300
    (applied by `corpus_size`)."""
    p.add_argument("--files", type=int, default=400)
    p.add_argument("--lines", type=int, default=500, help="lines per file")
    p.add_argument("--quick", action="store_true", help="100 files x 300 lines")


def corpus_size(a: Any) -> Any:
    if a.quick:
        a.files, a.lines = 100, 300
    return a


def corpus_files(path: str | Path) -> list[Path]:
    return sorted(Path(path).rglob("*.jsonl"))


# --------------------------------------------------------------------------------------
# bare FTS5 baseline


def bare_fts(path: Path, *, tokenize: str | None = None, contentless: bool = False,
             fresh: bool = True) -> sqlite3.Connection:
    """A bare FTS5 table `t(body)` in its own SQLite file (WAL, synchronous=NORMAL like
    memoryd). Default tokenizer unless `tokenize` is given."""
    if fresh:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    opts = []
    if tokenize:
        opts.append(f"tokenize = '{tokenize}'")
    if contentless:
        opts.append("content = ''")
    cols = ", ".join(["body", *opts])
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS t USING fts5({cols})")
    return conn


def fts_phrase(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


# --------------------------------------------------------------------------------------
# memoryd as a subprocess


@contextlib.contextmanager
def short_dir(prefix: str = "mdb") -> Iterator[Path]:
    """A directory under /tmp, short enough for a Unix socket path."""
    d = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    try:
        yield Path(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


class Memoryd:
    """`python -m memoryd` with MEMORYD_HOME=home watching `src` as generic JSONL."""

    def __init__(self, home: Path, src: Path, sock: Path, *, log_path: Path | None = None,
                 log_level: str = "WARNING", env: dict[str, str] | None = None,
                 new_session: bool = False, python_args: Sequence[str] = ()) -> None:
        """`new_session`: the daemon in a session of its own, as a service manager starts
        one (and as PostgreSQL's backends are): with the kernel's autogroup scheduling
        each session gets its own fair share of the CPUs, not one share for all the
        daemons a bench starts (bench/README, issue 14). `python_args` go before `-m
        memoryd` (bench/idle.py --probe: bench/memprobe.py runs the daemon in its process)."""
        self.home, self.src, self.sock = home, src, sock
        self.log_path = log_path or Path(f"{home}.log")
        self.client = MemorydClient(sock)
        self.started = 0.0
        cmd = [sys.executable, *python_args, "-m", "memoryd", "--no-default-sources",
               "--source", f"generic={src}", "--socket", str(sock), "--port", "0",
               "--log-level", log_level]
        # the bench venv has the test group, memoryd[embed] with it: a daemon measured
        # here is lexical unless the bench asks for embeddings (bench/embed.py does)
        full_env = {"MEMORYD_EMBED__ENABLED": "false", **os.environ, "MEMORYD_HOME": str(home),
                    **(env or {})}
        full_env.pop("MEMORYD_SOCKET", None)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(cmd, env=full_env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                     stderr=self._log, start_new_session=new_session)

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def _alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"memoryd exited with {self.proc.returncode}:\n{self.log_tail()}")

    def status(self) -> dict[str, Any] | None:
        try:
            return self.client.status()
        except (DaemonNotRunning, ConnectionError, FileNotFoundError, ApiError, OSError):
            return None

    def wait_ready(self, timeout: float = 60.0, interval: float = 0.02) -> float:
        """Seconds from spawn until /v1/health answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._alive()
            try:
                self.client.health()
                return time.perf_counter() - self.started
            except (DaemonNotRunning, ConnectionError, FileNotFoundError, OSError):
                time.sleep(interval)
        raise TimeoutError(f"memoryd not ready within {timeout}s:\n{self.log_tail()}")

    def wait_caught_up(self, timeout: float = 600.0, interval: float = 0.25,
                       progress: float | None = None, log=print) -> dict[str, Any]:
        """Poll /v1/status until `caught_up`; returns that status."""
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < deadline:
            self._alive()
            st = self.status()
            if st and st.get("caught_up"):
                return st
            if progress and st and time.monotonic() - last > progress:
                last = time.monotonic()
                log(f"  ... {st['units']:,} units, "
                    f"{st['queue_depth']} files queued")
            time.sleep(interval)
        raise TimeoutError(f"memoryd not caught up within {timeout}s:\n{self.log_tail()}")

    def peak_rss_mb(self) -> float | None:
        return peak_rss_mb(self.proc.pid)

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        return self.proc.returncode

    def __enter__(self) -> Memoryd:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def model_cpu_s(model: Any) -> float:
    """CPU seconds the embedding model's process (`memoryd.embed.engine`) has run; 0
    before it started."""
    return proc_cpu_s(model.pid) if model.pid is not None else 0.0


def proc_cpu_s(pid: int) -> float:
    """CPU seconds a process has run so far, all of its threads, to the nanosecond (the
    scheduler's own account, /proc/<pid>/task/*/schedstat; /proc/<pid>/stat counts in
    10 ms ticks). A thread that ended meanwhile drops out of the sum."""
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((t / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def peak_rss_mb(pid: int) -> float | None:
    """VmHWM (peak resident set) of a live process, from /proc (Linux only)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def self_peak_rss_mb() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 1024 if sys.platform != "darwin" else r / 2**20


def dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) / 1e6
