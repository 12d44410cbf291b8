"""`python -m vecmem.chat [--user U] [--session S]`: a chat with long-term memory.

With ``OPENAI_API_KEY`` and/or ``OPENAI_BASE_URL`` set it answers with ``VECMEM_CHAT_MODEL`` on any
OpenAI-compatible server. Without, it says so once, still runs every memory step (retrieval, gate,
extraction, supersession, summaries) with the deterministic rules, and shows what it would have sent.
A model failure (timeout, 429, 500, malformed JSON) is one line on stderr; the turn stays in short-term
memory and the chat goes on. ``main(argv, stdin=, stdout=, stderr=)`` returns the exit code, for tests.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, TextIO

from vecmem.agent.llm import ChatModel, chat_model_from_settings
from vecmem.agent.memory_agent import MemoryAgent, TurnResult
from vecmem.bank.api import MemoryApi
from vecmem.bank.chains import revision_number, version_dates
from vecmem.config import Settings
from vecmem.errors import VecmemError, is_user_error
from vecmem.interfaces.owner.opening import long_running_bank
from vecmem.interfaces.stopping import serve_until_stopped, start_before_any_stop, stops_cleanly
from vecmem.retrieval.rank import prior_share
from vecmem.storage.state.sessions import SessionStore

__all__ = ["main", "ChatRepl"]

HELP = """Commands:
  /memories [QUERY]   what this session would recall for QUERY (the most important ones without)
  /forget ID          delete a memory for good
  /edit ID TEXT       change what a memory says
  /history ID         a memory's versions and what it replaced, oldest first   /restore ID   undo a supersession
  /session NAME       switch to another session (short-term and working memory are per session)
  /task GOAL          start a task (working memory)   /task step TEXT   /task result TEXT   /task done
  /task               show the task in progress
  /stats              counts, summaries and the memory hit rate of this session
  /prompt             the last assembled prompt, with each section's token count
  /log                the write gate's recent decisions and their reasons
  /review             the review queue (uncertain extractions)   /review approve ID [TEXT]   /review reject ID
  /help               this text        /quit   leave (Ctrl-D works too)"""

_UNSET: Any = object()


class ChatRepl:
    def __init__(self, agent: MemoryAgent, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> None:
        self.agent = agent
        self.stdin = stdin
        self.out = stdout
        self.err = stderr
        self._warming: threading.Thread | None = None
        self.commands: dict[str, Callable[[str], None]] = {
            "memories": self.cmd_memories, "forget": self.cmd_forget, "edit": self.cmd_edit,
            "history": self.cmd_history, "restore": self.cmd_restore, "session": self.cmd_session,
            "task": self.cmd_task, "stats": self.cmd_stats, "prompt": self.cmd_prompt, "log": self.cmd_log,
            "review": self.cmd_review,
            "help": lambda _rest: self.say(HELP),
        }

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def error(self, text: str) -> None:
        print(f"vecmem: error: {text}", file=self.err, flush=True)

    def run(self) -> int:
        agent = self.agent
        self.say(f"vecmem chat — user {agent.user_id!r}, session {agent.session_id!r}. /help lists commands.")
        if agent.model is None:
            self.say("No model is configured (set OPENAI_API_KEY and/or OPENAI_BASE_URL, and VECMEM_CHAT_MODEL): "
                     "every memory step still runs, and each turn shows what would have been sent.")
        else:
            self.say(f"Model: {agent.model.name}")
        # The model and the keyword index load while the user types, not after the first message. A failure
        # here is not lost: the first turn meets the same error and reports it.
        self._warming = threading.Thread(target=self._warm_up, name="vecmem-warm-up", daemon=True)
        start_before_any_stop(self._warming)
        interactive = self.stdin is sys.stdin and self.stdin.isatty()
        if interactive:
            import readline  # noqa: F401 - gives input() line editing and history at a terminal
        while True:
            if interactive:
                try:
                    line = input("you> ")
                except EOFError:
                    return 0
            else:
                line = self.stdin.readline()
                if not line:
                    return 0
            line = line.strip()
            if not line:
                continue
            if line in ("/quit", "/exit", "/q"):
                return 0
            try:
                if line.startswith("/"):
                    name, _, rest = line[1:].partition(" ")
                    command = self.commands.get(name)
                    if command is None:
                        self.error(f"unknown command /{name}; /help lists them")
                    else:
                        command(rest.strip())
                else:
                    self.show(self._turn(line))
            except VecmemError as exc:
                self.error(str(exc))

    def _turn(self, line: str) -> TurnResult:
        """One turn, the model's answer printed as it is written."""
        started = False

        def on_answer(piece: str) -> None:
            nonlocal started
            if not started:
                self.out.write("assistant> ")
                started = True
            self.out.write(piece)
            self.out.flush()

        try:
            return self.agent.turn(line, on_answer=on_answer if self.agent.model is not None else None)
        finally:
            if started:
                self.say()  # the answer's line ends (also when it broke off: the error follows on its own line)

    def stop(self) -> None:
        """Wait for the warm-up, which may be inside the model's native code: the bank closes after this."""
        if self._warming is not None and self._warming.ident is not None:  # None: a stop came before it started
            self._warming.join()

    def _warm_up(self) -> None:
        try:
            self.agent.bank.prune(user_id=self.agent.user_id)  # the forgetting policy, once a chat (off by default)
            self.agent.bank.warm_up(user_id=self.agent.user_id)
        except VecmemError:
            pass  # the first turn raises the same error, and run() reports it there

    # ------------------------------------------------------------------------------------------ a turn

    def show(self, result: TurnResult) -> None:
        pack = result.pack
        if result.answer is not None:
            if not result.streamed:  # else it was printed as it came
                self.say(f"assistant> {result.answer}")
        elif result.answer_error is not None:
            self.error(f"{result.answer_error}; your message is kept in this session's short-term memory")
        else:
            tokens = ", ".join(f"{name} {count}" for name, count in pack.tokens.items())
            self.say(f"[no model] would send {len(pack.messages)} messages ({tokens} tokens); /prompt shows them")
        routed = "all types" if result.types is None else "+".join(result.types)
        recall = "proactive recall, " if result.proactive else ""
        held_back = f" ({len(pack.below_floor_ids)} below the relevance floor)" if pack.below_floor_ids else ""
        self.say(f"  recalled ({recall}{result.intent} -> {routed}){held_back}: " + (
            "; ".join(f"[{hit.type}] {hit.content} ({hit.score:.2f})" for hit in pack.memories) or "nothing"))
        for write in result.writes:
            decision = write.decision
            # a message learnt on a later turn than its own (its write step failed, or waited for an answer)
            head = f"  memory (learnt late: \"{_excerpt(decision.text)}\")" if write.late else "  memory"
            if not decision.keep:
                self.say(f"{head}: not kept ({decision.stage}: {decision.reason})")
                continue
            self.say(f"{head}: kept as {decision.memory_type} ({decision.stage}: {decision.reason})")
            for item in write.written:
                if item.action == "NONE":
                    self.say(f"    unchanged: {item.reason}")
                elif item.record is not None:
                    replaced = "".join(f"; {'also ' if n else ''}replaces {r.id} \"{r.content}\""
                                       for n, r in enumerate([*([item.replaced] if item.replaced else []),
                                                              *item.also_replaced]))
                    self.say(f"    {item.record.id} [{item.record.type}, {item.record.scope}] "
                             f"\"{item.record.content}\"{replaced}")
        if result.write_error is not None:
            self.error(f"{result.write_error}; the turn stays in short-term memory and is retried next turn")
        for summary in result.summaries:
            level = "global" if "global" in summary.tags else "local"
            self.say(f"  summary ({level}): {summary.content}")
        for notice in result.notices:
            self.say(f"  note: {notice}")

    # ------------------------------------------------------------------------------------------ commands

    def cmd_memories(self, query: str) -> None:
        agent = self.agent
        hits = agent.bank.search(query, 10, user_id=agent.user_id, session_id=agent.session_id, record_access=False)
        if not hits:
            self.say("no memories")
        w = agent.bank.settings.weights
        for hit in hits:
            share = prior_share(hit.similarity, w.gated)
            gate = f"{share:.3f}·" if w.gated else ""
            self.say(f"{hit.id}  {hit.score:.3f} = {w.similarity:g}·{hit.similarity:.3f} + {gate}({w.recency:g}·"
                     f"{hit.recency:.3f} + {w.importance:g}·{hit.importance:.2f})  [{hit.type}, {hit.record.scope}] "
                     f"{hit.content}")

    def cmd_forget(self, memory_id: str) -> None:
        record = self.agent.bank.forget(memory_id, user_id=self.agent.user_id)
        self.say(f"forgot {record.id}: {record.content}")

    def cmd_edit(self, rest: str) -> None:
        memory_id, _, text = rest.partition(" ")
        record = self.agent.bank.update(memory_id, user_id=self.agent.user_id, content=text)
        self.say(f"{record.id} now says: {record.content}")

    def cmd_history(self, memory_id: str) -> None:
        chain = self.agent.bank.history(memory_id, user_id=self.agent.user_id)
        began = version_dates(chain)  # oldest first, each version dated when it began to say what it says
        for record in chain:
            if revision_number(record) is not None:  # what the memory said before an edit, kept by it
                state = f"earlier version, edited {record.created_at:%Y-%m-%d %H:%M}"
            else:
                state = f"superseded by {record.superseded_by}" if record.superseded else "live"
            self.say(f"{began[record.id]:%Y-%m-%d %H:%M}  {record.id}  ({state})  {record.content}")

    def cmd_restore(self, memory_id: str) -> None:
        record = self.agent.bank.restore(memory_id, user_id=self.agent.user_id)
        self.say(f"restored {record.id}: {record.content}")

    def cmd_review(self, rest: str) -> None:
        bank, user = self.agent.bank, self.agent.user_id
        action, _, rest = rest.partition(" ")
        memory_id, _, text = rest.strip().partition(" ")
        if action == "approve" and memory_id:
            record = bank.approve(memory_id, user_id=user, content=text.strip() or None)
            self.say(f"approved {record.id}: {record.content}")
        elif action == "reject" and memory_id:
            record = bank.reject(memory_id, user_id=user)
            self.say(f"rejected {record.id}: {record.content}")
        elif action:
            self.error("use /review, /review approve ID [TEXT] or /review reject ID")
        else:
            queue = bank.review_queue(user_id=user)
            if not queue:
                self.say("the review queue is empty")
            for record in queue:
                self.say(f"{record.id}  confidence {record.confidence:.2f}  [{record.type}, {record.scope}] "
                         f"{record.content}")

    def cmd_session(self, name: str) -> None:
        self.agent.switch_session(name)
        self.say(f"now in session {self.agent.session_id!r}")

    def cmd_task(self, rest: str) -> None:
        agent = self.agent
        sessions, user, session = agent.sessions, agent.user_id, agent.session_id
        verb, _, text = rest.partition(" ")
        if not rest:
            task = sessions.task(user, session)
            self.say(task.render() if task else "no task in progress")
        elif verb == "done":
            task = sessions.finish_task(user, session)
            self.say(f"task done: {task.progress()}")
        elif verb in ("step", "result"):
            task = sessions.add_to_task(user, session, **{verb: text})
            self.say(task.render())
        elif sessions.task(user, session) is not None:
            self.error("a task is already in progress; finish it with /task done")
        else:
            self.say(sessions.start_task(user, session, rest).render())

    def cmd_stats(self, _rest: str) -> None:
        agent = self.agent
        stats = agent.bank.stats(user_id=agent.user_id)
        counters = agent.sessions.counters(agent.user_id, agent.session_id)
        self.say(f"{stats.count} memories ({stats.live} live, {stats.superseded} superseded): "
                 + ", ".join(f"{name} {n}" for name, n in stats.by_type.items()))
        rate = "n/a" if counters.hit_rate is None else f"{counters.hit_rate:.0%} ({counters.used}/{counters.injected})"
        self.say(f"session {agent.session_id!r}: {counters.kept_turns} kept turns, "
                 f"{len(counters.local_summaries)} local summaries, memory hit rate {rate}")
        total, last = agent.sessions.usage(agent.user_id, agent.session_id)
        if last is None:
            self.say("model: no calls in this session" + ("" if agent.model else " (no model configured)"))
            return
        self.say(f"model: {total.calls} calls in {total.turns} turns, {total.prompt_tokens} prompt + "
                 f"{total.completion_tokens} completion tokens ({total.calls / total.turns:.1f} calls and "
                 f"{(total.prompt_tokens + total.completion_tokens) / total.turns:.0f} tokens a turn); last turn: "
                 f"{last.calls} calls, {last.prompt_tokens} + {last.completion_tokens} tokens")

    def cmd_prompt(self, _rest: str) -> None:
        pack = self.agent.last_pack
        if pack is None:
            self.say("no prompt yet")
            return
        self.say("tokens: " + ", ".join(f"{name} {pack.tokens[name]}/{pack.limits[name]}" for name in pack.tokens))
        for message in pack.messages:
            self.say(f"--- {message['role']}")
            self.say(message["content"])

    def cmd_log(self, _rest: str) -> None:
        decisions = self.agent.sessions.decisions(self.agent.user_id, self.agent.session_id, limit=20)
        if not decisions:
            self.say("no decisions yet")
        for item in decisions:
            verdict = f"kept as {item.memory_type}" if item.kept else "dropped"
            self.say(f"{item.created_at:%H:%M:%S}  {verdict:<22} {item.stage:<8} {item.reason}  | {item.text}")


def _excerpt(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def main(
    argv: list[str] | None = None,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    bank: MemoryApi | None = None,
    model: ChatModel | None = _UNSET,
) -> int:
    err = stderr or sys.stderr
    parser = argparse.ArgumentParser(prog="python -m vecmem.chat", description="A chat with long-term memory.")
    parser.add_argument("--user", help="user id (default: VECMEM_USER or 'default')")
    parser.add_argument("--session", help="session id (default: a new one named after the current time)")
    args = parser.parse_args(argv)
    code = 0
    try:  # the end of input (Ctrl-D, /quit), SIGTERM and Ctrl-C all end it the same way (stopping.py): the
        # warm-up joined, the session store and the bank closed, exit status 0
        with stops_cleanly(), contextlib.nullcontext(bank) if bank is not None else long_running_bank(
                Settings.from_env(), program="python -m vecmem.chat") as opened:
            settings = opened.settings
            with contextlib.closing(SessionStore.open(settings)) as sessions:
                agent = MemoryAgent(
                    opened,
                    sessions,
                    model=chat_model_from_settings(settings) if model is _UNSET else model,
                    user_id=args.user,
                    session_id=args.session or datetime.now().strftime("chat-%Y%m%d-%H%M%S"),
                )
                repl = ChatRepl(agent, stdin or sys.stdin, stdout or sys.stdout, err)
                try:
                    code = serve_until_stopped(repl.run)
                finally:
                    repl.stop()
    except VecmemError as exc:
        print(f"vecmem: error: {exc}", file=err)
        return 2 if is_user_error(exc) else 1
    return code


if __name__ == "__main__":
    sys.exit(main())
