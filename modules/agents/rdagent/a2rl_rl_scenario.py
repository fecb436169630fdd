"""R&D-Agent's RL scenario, with the two descriptions its base class requires.

R&D-Agent's RL post-training loop (rdagent 1.0.0 on PyPI, and 0.8.1.dev24 before it) cannot start:
`RLPostTrainingScen` leaves `rich_style_description` and `get_scenario_all_desc`, abstract in
`rdagent.core.scenario.Scenario`, unimplemented, so constructing it raises TypeError. The adapter
names this subclass through R&D-Agent's own setting for the scenario class (`RL_SCEN`); everything
else (hypotheses, coding, running, submitting, feedback) is R&D-Agent's code, unchanged. Both methods
only describe the scenario, so they return its background, the text its own prompts already use.
"""

from rdagent.scenarios.rl.scen.scenario import RLPostTrainingScen


class Scenario(RLPostTrainingScen):
    @property
    def rich_style_description(self) -> str:
        return self.background

    def get_scenario_all_desc(self, task=None, filtered_tag=None, simple_background=None) -> str:
        return self.background
