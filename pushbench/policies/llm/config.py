"""Validated parameters of the LLM policies (the ``params`` of a policy in an experiment file).

Unknown keys are errors, so a typo in an experiment file fails when the experiment is loaded
(each policy class's ``Params`` is one of these models) instead of silently running with
defaults.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Price(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid")
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return round(
            prompt_tokens * self.input_per_mtok / 1e6
            + completion_tokens * self.output_per_mtok / 1e6,
            8,
        )


class LLMConfig(BaseModel):
    """Everything that decides how an LLM policy talks to its model.

    ``prices`` is either one :class:`Price` or a table ``{model name: Price}`` (the experiment
    file's price table); the entry for ``model`` is used, and no entry means no cost is reported.
    ``api_key_env`` names the environment variable holding the key (``null`` for local servers
    that need none); the key itself never enters a record.
    """

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    temperature: float | None = Field(default=0.0, ge=0, le=2)  # None: not sent
    send_seed: bool = True
    max_tokens: int = Field(default=512, ge=1)
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    tool_choice: Literal["auto", "required", "none"] | None = "auto"
    # None: no trimming, the whole conversation is sent (up to the model's own window): the
    # full-context arm of a context experiment (docs/llm.md, "Context as a factor").
    context_tokens: int | None = Field(default=8000, ge=256)
    # The server's context window (tokens); None: discovered from the server's API where it
    # says (discover_window), else learned from its first context-length refusal (window.py).
    # The context budget is never more than what fits it.
    context_window: int | None = Field(default=None, ge=256)
    discover_window: bool = True
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=8, ge=0)
    backoff_base: float = Field(default=1.0, ge=0)
    backoff_max: float = Field(default=60.0, ge=0)
    prices: dict[str, Price] | Price | None = None
    extra_body: dict[str, Any] | None = None
    sdk_transform: bool = False
    system_prompt: str | None = None
    max_memory_turns: int = Field(default=3, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _flat_price(cls, data: Any) -> Any:
        # A flat {input_per_mtok, output_per_mtok} mapping is one price, not a table.
        if (
            isinstance(data, dict)
            and isinstance(data.get("prices"), dict)
            and "input_per_mtok" in data["prices"]
        ):
            data = {**data, "prices": Price.model_validate(data["prices"])}
        return data

    def price(self) -> Price | None:
        if isinstance(self.prices, Price):
            return self.prices
        if isinstance(self.prices, dict):
            return self.prices.get(self.model)
        return None


class LangGraphConfig(LLMConfig):
    """:class:`LLMConfig` plus the LangGraph policies' checkpoint settings."""

    checkpoint_dir: str | None = None
    resume: bool = True
    keep_checkpoints: bool = False
    durability: Literal["sync", "async", "exit"] = "exit"
    checkpoint_every: int = Field(default=10, ge=0, le=1_000_000)


class MemGPTConfig(LLMConfig):
    """:class:`LLMConfig` plus the MemGPT-style baseline's core-memory size (characters)."""

    core_chars: int = Field(default=2000, ge=1, le=1_000_000)
