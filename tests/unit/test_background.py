"""Background children's rules (``workflows/children/background.py``): one item per settled
result, outside the inbox cap, read once (issue 25 item 2)."""

from __future__ import annotations

from tests.unit.fakes import parent_with
from toolnexus_temporal.workflows.contract.models import InboxItem, Request, TaskResult
from toolnexus_temporal.workflows.contract.state import AgentInput, ChildInfo
from toolnexus_temporal.workflows.inbox import drain, post_error, restore_drained
from toolnexus_temporal.workflows.rules import background
from toolnexus_temporal.workflows.rules.render import render_turn_input


def settled(s, child: str, seq: int, result: TaskResult, state: str = "idle") -> bool:
    s.roster.children_info[child] = ChildInfo(state=state, result_seq=seq, last_result=result)
    return background.note(s, child)


def test_a_settled_result_is_one_child_item_read_once() -> None:
    s = parent_with("p/x.1", "p/y.2", max_concurrent=None)
    background.track(s, "p/x.1")
    assert not background.note(s, "p/x.1")  # no result yet
    assert settled(s, "p/x.1", 1, TaskResult(status="done", text="found it"))
    assert not background.note(s, "p/x.1")  # the same snapshot again: nothing new
    assert not settled(s, "p/y.2", 1, TaskResult(status="done", text="x"))  # not background
    [item] = s.background.waiting
    assert (item.from_, item.channel, item.text) == ("p/x.1", "child", "[done] found it")
    drain(s, None)
    assert s.background.waiting == []
    text = render_turn_input(None, s.intake.turn_inbox)
    assert text.endswith("1. [from=p/x.1 channel=child] [done] found it")
    assert not background.note(s, "p/x.1")  # read: a repeated report adds nothing


def test_a_full_inbox_never_refuses_a_child_item() -> None:
    s = parent_with("p/x.1", max_concurrent=None)
    s.options = s.options.model_copy(update={"inbox_cap": 1})
    s.intake.items.append(InboxItem(text="a post"))
    assert post_error(s, InboxItem(text="another")) == "inbox full (1)"
    background.track(s, "p/x.1")
    assert settled(s, "p/x.1", 1, TaskResult(status="done", text="r"))
    drain(s, "go")
    assert [i.text for i in s.intake.turn_inbox] == ["a post", "[done] r"]
    restore_drained(s)  # an interrupted turn: both come back, read by the next one
    assert [i.text for i in s.intake.items] == ["a post", "[done] r"]


def test_each_unread_result_of_one_child_is_its_own_item() -> None:
    """Each settled turn reaches the parent once: two results before the parent reads them
    are two items, oldest first (they merged into the latest before, and the older text was
    lost); a result never reported one by one (seq 2 here) is counted in the next item."""
    s = parent_with("p/x.1", max_concurrent=None)
    background.track(s, "p/x.1")
    assert settled(s, "p/x.1", 1, TaskResult(status="done", text="first"))
    req = Request(id="p/x.1#1", kind="approval", prompt="deploy?")
    pending = TaskResult(status="pending", text="", pending=req)
    assert settled(s, "p/x.1", 3, pending, state="suspended")
    assert [i.text for i in s.background.waiting] == [
        "[done] first",
        "[pending] approval: deploy? (request p/x.1#1)",
    ]
    read, left = background.consume(s, "p/x.1")  # a background tool returned them
    assert left == 0
    assert [i.text for i in read] == [
        "[done] (1 earlier results not kept) first",
        "[pending] approval: deploy? (request p/x.1#1)",
    ]
    assert s.background.waiting == [] and not background.note(s, "p/x.1")
    assert background.consume(s, "p/x.1") == ([], 0)  # nothing twice


def test_unread_items_per_child_are_bounded_and_the_drop_is_said() -> None:
    s = parent_with("p/x.1", "p/y.2", max_concurrent=None)
    background.track(s, "p/x.1")
    background.track(s, "p/y.2")
    assert settled(s, "p/y.2", 1, TaskResult(status="done", text="y"))
    extra = 3
    for seq in range(1, background.UNREAD_PER_CHILD + extra + 1):
        assert settled(s, "p/x.1", seq, TaskResult(status="done", text=f"r{seq}"))
    mine = [i for i in s.background.waiting if i.from_ == "p/x.1"]
    assert len(mine) == background.UNREAD_PER_CHILD
    drain(s, None)
    texts = [i.text for i in s.intake.turn_inbox]
    assert texts[0] == "[done] y"  # another child's item is untouched
    assert texts[1] == f"[done] ({extra} earlier results not kept) r{extra + 1}"
    assert texts[-1] == f"[done] r{background.UNREAD_PER_CHILD + extra}"
    assert "unread" not in background.listing(s)  # all read


def test_state_survives_continue_as_new_and_closed_children_leave() -> None:
    s = parent_with("p/x.1", "p/y.2", max_concurrent=None)
    background.track(s, "p/x.1")
    background.track(s, "p/y.2")
    assert settled(s, "p/x.1", 1, TaskResult(status="done", text="r"), state="closed")
    background.compact(s)
    assert list(s.background.followed) == ["p/y.2"] and len(s.background.waiting) == 1
    carried = AgentInput.model_validate_json(AgentInput(state=s).model_dump_json()).state
    assert carried.background == s.background
    assert not background.note(carried, "p/x.1")  # a closed child's late report: nothing


def test_listing_names_each_child_and_its_unread_item() -> None:
    s = parent_with("p/x.1", max_concurrent=None)
    assert background.listing(s) == "no background children"
    background.track(s, "p/x.1")
    assert settled(s, "p/x.1", 1, TaskResult(status="error", text="boom", is_error=True))
    assert background.listing(s) == "p/x.1: idle, 1 result(s), last: [error] boom (1 unread)"
    # a paused child (issue 37 item 10): its report says so, and the listing shows it
    s.roster.children_info["p/x.1"].paused = True
    assert background.listing(s).startswith("p/x.1: idle (paused), 1 result(s)")


def test_unread_items_of_a_child_stay_within_the_carried_state_bound() -> None:
    """A child settling :data:`UNREAD_PER_CHILD` turns of 64,000 CJK characters each (192 KB
    of JSON apiece) while its parent does not read them: what the parent carries across
    continue-as-new (one payload) stays below the server's 2 MiB, and the newest result is
    kept whole (the oldest are dropped and counted)."""
    from toolnexus_temporal.workflows.contract.limits import BLOB_BYTES
    from toolnexus_temporal.workflows.contract.models import MAX_TEXT

    s = parent_with("p/x.1", max_concurrent=None)
    background.track(s, "p/x.1")
    for seq in range(1, background.UNREAD_PER_CHILD + 1):
        text = f"r{seq} " + "界" * MAX_TEXT
        assert settled(s, "p/x.1", seq, TaskResult(status="done", text=text))
    carried = len(AgentInput(state=s).model_dump_json().encode())
    assert carried < BLOB_BYTES // 2, carried
    newest = s.background.waiting[-1].text
    assert newest.startswith(f"[done] r{background.UNREAD_PER_CHILD} ")
    drain(s, None)
    first = s.intake.turn_inbox[0].text
    assert "earlier results not kept)" in first


def test_a_background_tool_reads_at_most_one_items_worth_and_leaves_the_rest() -> None:
    """background_wait joins unread results into one tool output, bounded like an inbox item
    (MAX_TEXT): four results of 30,000 characters come two per call, none lost or repeated
    (joined whole, the output could reach four times the bound)."""
    from toolnexus_temporal.workflows.contract.models import MAX_TEXT

    s = parent_with("p/x.1", max_concurrent=None)
    background.track(s, "p/x.1")
    for seq in range(1, 5):
        text = f"r{seq} " + "x" * 30_000
        assert settled(s, "p/x.1", seq, TaskResult(status="done", text=text))
    first, left = background.consume(s, "p/x.1")
    assert [i.text[:9] for i in first] == ["[done] r1", "[done] r2"] and left == 2
    assert sum(len(i.text) + 1 for i in first) <= MAX_TEXT
    second, left = background.consume(s, "p/x.1")
    assert [i.text[:9] for i in second] == ["[done] r3", "[done] r4"] and left == 0
    assert not any("not kept" in i.text for i in first + second)
    assert background.consume(s, "p/x.1") == ([], 0)
