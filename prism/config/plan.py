"""``prism-plan`` (``conf/plan.yaml``): the effect a study must detect and the designs to try."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from prism.config.choices import PlanEffectKindField
from prism.config.compare import CompareFilters
from prism.config.experiment import TrackingConfig


@dataclass
class PlanEffect:
    """The effect a plan is to detect (``prism.plan``)."""

    # shift: an excess (answer measure) on the step baseline -> condition; accuracy: a difference in accuracy
    # between two models under condition; interaction: a single grid cell's interaction, in logits.
    # (str, not Literal: this OmegaConf refuses Literal annotations; prism.plan checks it against PLAN_EFFECTS.)
    kind: PlanEffectKindField = "shift"
    # In the effect's own units: excess (shift), accuracy difference (accuracy), logits (interaction).
    size: float = 0.1
    # The step's to-condition (shift), the condition (accuracy) or the grid cell (interaction); empty: the
    # design's second condition (shift, accuracy) or its last cell (interaction).
    condition: str = ""


@dataclass
class PlanRates:
    """Stated rates, used when no pilot run is named or selected (``prism.plan``)."""

    # The baseline's share of correct answers (shift, accuracy) or of answers consistent with the baseline
    # (interaction) at the average question.
    accuracy: float = 0.6
    # Standard deviation of the questions' logits around it (how much questions differ).
    spread: float = 0.5
    # Options per question.
    options: int = 4
    # The condition set's size (shift, accuracy): the baseline and this many - 1 others, named C0, C1, ...
    conditions: int = 5
    # A grid's axes, each its number of values with the baseline's (interaction), e.g. [5, 5].
    grid: list[int] = field(default_factory=lambda: [5, 5])


@dataclass
class PlanConfig:
    """``python -m prism.plan``: how many questions and repetitions a design needs (see ``prism.plan``).

    The pilot is ``runs`` or the runs compare's ``filters`` select; with neither (and ``pilot=false``), the
    stated ``rates``.
    """

    defaults: list[Any] = field(default_factory=list)
    tracking: TrackingConfig = MISSING
    # Pilot runs by MLflow run id (the first is the model planned for; accuracy takes the first two).
    runs: list[str] = field(default_factory=list)
    filters: CompareFilters = field(default_factory=CompareFilters)
    # Read a pilot from MLflow (runs or filters); false: plan from the stated rates alone.
    pilot: bool = True
    rates: PlanRates = field(default_factory=PlanRates)
    effect: PlanEffect = field(default_factory=PlanEffect)
    baseline: str = "P0"
    # The dataset.n values (questions) to try, and the repetitions.
    n: list[int] = field(default_factory=lambda: [25, 50, 100, 200])
    repetitions: list[int] = field(default_factory=lambda: [3])
    # The power wanted and the level (the run's significance level).
    power: float = 0.8
    alpha: float = 0.05
    # Tests in the Holm family the test is corrected in (a lone effect must reach alpha / family);
    # null: the design's non-baseline conditions, as compare corrects them.
    holm_family: int | None = None
    # Simulated studies per design point, and permutations per simulated shift test.
    simulations: int = 200
    permutations: int = 1000
    seed: int = 0
    # Where the table and plot are written before upload; null: Hydra's output directory of the job.
    output_dir: str | None = None
