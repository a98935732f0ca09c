"""What a request costs, line by line: the raw counts, their estimated share, the calibrated lines.

The fit decides on raw counts; the breakdown reports them calibrated. Only estimated tokens
are scaled (each line floored, the whole rounded up), and the rounding left over goes to one
line, so the lines close by construction.
"""

from __future__ import annotations

from collections.abc import Sequence

from otel_ctx.engine._breakdown import Breakdown
from otel_ctx.engine._budget import BudgetPolicy
from otel_ctx.engine._calibration import SCALE, Calibration
from otel_ctx.engine._model import COMPONENT_LINE, LINES, Line, RequestModel, Turn
from otel_ctx.engine._sources import SourceInfo, strictest


class Tally:
    """Raw tokens of the kept turns (and of a summary) by breakdown line, and their estimated share.

    ``by_part``: the dialect's counts are the provider's own, so only parts marked inexact
    (documents, images of unknown size) are estimates. Otherwise every line is one (no
    offline tokenizer, a fallback encoding, or an exact counter whose figure the factor
    brings the whole to), and with ``whole_schema`` the whole tool schema too, not only the
    share the reader marked.
    """

    __slots__ = (
        "blocks_inexact", "inexact", "inexact_lines", "lines", "media", "prompt", "schema",
        "schema_inexact", "skills", "total", "transcript",
    )  # fmt: skip

    def __init__(
        self,
        model: RequestModel,
        kept: Sequence[int],
        summary: Turn | None,
        *,
        by_part: bool,
        whole_schema: bool,
    ) -> None:
        turns = model.turns
        known = model.known.turns
        if known and len(kept) == len(turns):  # nothing dropped: the history's lines were added up
            lines: dict[Line, int] = dict(zip(LINES, model.known.sums[1], strict=True))
        else:
            known = 0
            lines = dict.fromkeys(LINES, 0)
        inexact_lines: dict[Line, int] = {}
        media = 0
        for k in kept[known:]:
            t = turns[k]
            if t.mixed:
                for line, tokens in t.lines():
                    lines[line] += tokens
            else:
                lines[t.role] += t.cost
            if t.inexact:
                for p in t.parts:
                    if not p.exact:
                        if by_part:
                            line = COMPONENT_LINE[p.component] or t.role
                            inexact_lines[line] = inexact_lines.get(line, 0) + p.tokens
                        if p.component in ("image", "document"):
                            media += p.tokens
        lines["assistant"] += model.priming  # the reply priming is the assistant's turn opening
        if summary is not None:
            for line, tokens in summary.lines():
                lines[line] += tokens
        self.prompt = model.block_tokens("system_prompt")
        self.skills = model.block_tokens("skills")
        self.schema = model.tool_schema
        #: The system prompt and skills blocks are estimates (as a whole) too.
        self.blocks_inexact = not by_part
        if by_part:
            self.schema_inexact = min(model.schema_inexact, model.tool_schema)
        else:
            inexact_lines = {line: v for line, v in lines.items() if v}
            self.schema_inexact = model.tool_schema if whole_schema else model.schema_inexact
        self.lines = lines
        self.transcript = sum(lines.values())
        #: The whole request: the lines, the tool schema and every block.
        self.total = self.transcript + model.fixed
        #: Of ``lines``, the tokens counted by an estimate (a bound, a guess from size or pages).
        self.inexact_lines = inexact_lines
        #: Of the estimated tokens, those of images and documents: their error is not the text's.
        self.media = media
        #: Every estimated token, whatever its line.
        blocks_inexact = self.prompt + self.skills if self.blocks_inexact else 0
        self.inexact = sum(inexact_lines.values()) + self.schema_inexact + blocks_inexact

    def estimated_lines(self) -> tuple[str, ...]:
        """The breakdown lines holding an estimated part, in the breakdown's order."""
        out: tuple[str, ...] = tuple(line for line in LINES if self.inexact_lines.get(line))
        if self.schema_inexact:
            out += ("tool_schema",)
        if self.blocks_inexact and self.prompt:
            out += ("system_prompt",)
        if self.blocks_inexact and self.skills:
            out += ("skills",)
        return out

    def breakdown(
        self,
        cal: Calibration,
        policy: BudgetPolicy,
        sources: tuple[SourceInfo, ...],
        *,
        prompt_in_turns: bool,
    ) -> Breakdown:
        """The calibrated breakdown against ``policy``: exact parts as counted, estimates scaled."""
        prompt, skills = self.prompt, self.skills
        if cal.scaled == SCALE or not self.inexact:  # every line as counted: no scaling to do
            estimated = self.total
            by_role: dict[str, int] = dict(self.lines.items())
            transcript = self.transcript
        else:
            # Exact parts as counted, estimated parts scaled (each line floored; the whole rounded up).
            estimated = self.total - self.inexact + cal.up(self.inexact)
            est = self.inexact_lines
            by_role = {r: v - est.get(r, 0) + cal.down(est.get(r, 0)) for r, v in self.lines.items()}
            transcript = sum(by_role.values())
            if self.blocks_inexact:
                prompt, skills = cal.down(prompt), cal.down(skills)
        # The calibrated lines are floored, so a few tokens are left over. They belong to the
        # tool schema when there is one (its marginal cost is a remainder anyway); a request
        # without tools gets them on its largest line, so an empty line reads 0 every round.
        remainder = estimated - transcript - prompt - skills
        if not self.schema and remainder:
            if transcript:
                by_role[max(self.lines, key=self.lines.__getitem__)] += remainder
                transcript += remainder
            elif prompt >= skills:
                prompt += remainder
            else:
                skills += remainder
        budget = policy.budget
        return Breakdown(
            context_length=policy.context_length,
            request_limit=policy.request_limit,
            reserved_output=policy.reserved_output,
            safety_margin=policy.safety_margin,
            budget=budget,
            transcript=transcript,
            # The remainder: the marginal cost of the schema block, so the lines close.
            tool_schema=estimated - transcript - prompt - skills,
            system_prompt=prompt,
            skills=skills,
            estimated=estimated,
            remaining=budget - estimated,
            transcript_by_role=by_role,
            system_prompt_in_transcript=prompt_in_turns,
            sources=sources,
            data_class=strictest(s.data_class for s in sources) if sources else None,
        )
