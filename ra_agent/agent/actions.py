"""The validation of an Action against the tool registry (`registry.py`), the config and the handbook."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ra_agent.agent.goal import LLM_STATUSES, PRIMARY_GOALS, QUESTION_ID_RE, GoalMutationError, validate_changes
from ra_agent.agent.registry import REGISTRY_SPECS
from ra_agent.config import Config
from ra_agent.llm.base import ReplySchema
from ra_agent.llm.protocol import (
    ActionError,
    NoAction,
    ParsedAction,
    ReplyLimits,
    ToolSpec,
    ValidAction,
    check_call,
    describe_specs,
    resolve_action,
)

if TYPE_CHECKING:
    from ra_agent.agent.handbook import Handbook

log = logging.getLogger(__name__)


def _refusal(spec: ToolSpec, cfg: Config | None, handbook: Handbook | None) -> str | None:
    """Why a tool may not run at all (config switch, handbook whitelist), else None."""
    if not spec.gated:
        return None
    if cfg is not None and not getattr(cfg.tools, f"enable_{spec.name}", True):
        return f"{spec.name} is disabled in config.toml [tools] enable_{spec.name}"
    if handbook is not None and spec.name not in handbook.tools_allowed:
        return f"{spec.name} is not in the handbook's Tools_allowed ({', '.join(handbook.tools_allowed) or 'none'})"
    return None


def validate_action(
    action: ParsedAction,
    *,
    cfg: Config | None = None,
    handbook: Handbook | None = None,
    specs: Mapping[str, ToolSpec] | None = None,
) -> ValidAction | ActionError:
    """Check a parsed Action against the registry, config switches and the handbook; fill defaults."""
    specs = REGISTRY_SPECS if specs is None else specs
    allowed_hosts = tuple(cfg.tools.allowed_hosts if cfg is not None else Config().tools.allowed_hosts)

    def error(kind: str, message: str) -> ActionError:
        return ActionError(kind, message, tool=action.tool, raw=action.raw, repaired=action.repaired)

    spec = specs.get(action.tool)
    refusal = _refusal(spec, cfg, handbook) if spec is not None else None
    if refusal:
        return error("tool_not_allowed", refusal)
    checked = check_call(action, specs, allowed_hosts, (cfg or Config()).llm.max_arg_chars)
    if isinstance(checked, ActionError):
        return checked
    spec, args = checked.spec, dict(checked.args)
    if args.get("expand_mode") == "ripple" and handbook is not None and not handbook.exploration:
        return error("tool_not_allowed", "expand_mode 'ripple' needs 'Exploration: true' in the handbook")
    if spec.name == "merge_clusters" and args["source"] == args["target"]:
        return error("bad_arg", "merge_clusters needs two different clusters")
    if spec.kind == "goal":
        try:
            args["changes"] = validate_changes(args["changes"])
        except GoalMutationError as exc:
            return error("forbidden_change" if exc.forbidden else "bad_arg", f"update_goal: {exc}")
    return ValidAction(spec.name, args, spec, repaired=action.repaired)


def interpret_reply(
    reply: str,
    ask_repair: Callable[[str], str],
    *,
    cfg: Config | None = None,
    handbook: Handbook | None = None,
    specs: Mapping[str, ToolSpec] | None = None,
) -> ValidAction | NoAction | ActionError:
    """Parse and validate one reply, with one repair turn for a malformed reply or a schema slip (issue 13)."""
    limits = ReplyLimits.from_config((cfg or Config()).llm)
    return resolve_action(
        reply, ask_repair, lambda parsed: validate_action(parsed, cfg=cfg, handbook=handbook, specs=specs), limits
    )


def describe_tools(
    *, cfg: Config | None = None, handbook: Handbook | None = None, specs: Mapping[str, ToolSpec] | None = None
) -> str:
    """Markdown list of the tools the LLM may call right now (signature and purpose), for prompts."""
    return describe_specs(allowed_specs(cfg=cfg, handbook=handbook, specs=specs))


def allowed_specs(
    *, cfg: Config | None = None, handbook: Handbook | None = None, specs: Mapping[str, ToolSpec] | None = None
) -> list[ToolSpec]:
    """The tools the brain may call now: the prompt lists them and the reply schema names exactly these."""
    specs = REGISTRY_SPECS if specs is None else specs
    return [s for s in specs.values() if _refusal(s, cfg, handbook) is None]


def question_schema(question_ids: Sequence[str]) -> dict[str, Any]:
    """A question id argument: an enum of the handbook's question ids, or the id's pattern before they are known."""
    return {"enum": list(question_ids)} if question_ids else {"type": "string", "pattern": QUESTION_ID_RE.pattern}


def goal_changes_schema(cluster_ids: list[str], question_ids: Sequence[str] = ()) -> dict[str, Any]:
    """update_goal's `changes` as a schema: one field per change, each with the values validate_changes accepts."""
    from ra_agent.llm.structured import STRING_CHARS

    text = {"type": "string", "minLength": 1, "maxLength": STRING_CHARS}
    cluster = {"enum": cluster_ids} if cluster_ids else {**text, "maxLength": 64}
    question = question_schema(question_ids)
    fields: dict[str, Any] = {
        "status": {"enum": list(LLM_STATUSES)},
        "primary_goal": {"enum": list(PRIMARY_GOALS)},
        "question_id": question,
        "questions_done": {"type": "array", "items": question, "minItems": 1, "maxItems": 50},
        "cluster_id": cluster,
        "topic": text,
        "rejected_clusters": {"type": "array", "items": cluster, "minItems": 1, "maxItems": 20},
        "pending_queries": {"type": "array", "items": text, "minItems": 1, "maxItems": 5},
    }
    return {"anyOf": [{"type": "object", "properties": {k: v}, "required": [k], "additionalProperties": False}
                      for k, v in fields.items()]}  # fmt: skip


def cycle_schema(
    cfg: Config, handbook: Handbook, cluster_ids: list[str], question_ids: Sequence[str] = ()
) -> ReplySchema:
    """The JSON schema of a cycle's reply: reasoning, then an Action naming one of the allowed tools, its
    arguments typed, cluster ids as an enum of the clusters the prompt shows and question ids as an enum of the
    handbook's questions, no extra keys."""
    from ra_agent.llm.structured import action_schema

    overrides: dict[str, dict[str, Any]] = {"update_goal.changes": goal_changes_schema(cluster_ids, question_ids)}
    overrides.update({f"{spec.name}.question_id": question_schema(question_ids)
                      for spec in REGISTRY_SPECS.values() if "question_id" in spec.args})  # fmt: skip
    if not handbook.exploration:  # ripple needs Exploration: true
        overrides["search_pubmed.expand_mode"] = {"enum": ["semantic"]}
    return action_schema(allowed_specs(cfg=cfg, handbook=handbook), cluster_ids, overrides)
