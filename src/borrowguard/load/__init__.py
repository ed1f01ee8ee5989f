"""Load generation for `borrowguard verify`: scenarios, the asyncio client, bounded metrics.

factory = RequestFactory(ScenarioSettings(), model="my-model")
metrics = LoadMetrics(factory.scenarios)
async with ChatClient(url, concurrency=16, timeout=60) as client:
    await LoadRun(client, factory, metrics, LoadPlan(concurrency=16, duration=30)).run()
metrics.summary(30.0)
"""

from borrowguard.load.client import ChatClient, Outcome
from borrowguard.load.metrics import LoadMetrics, LogHistogram, TimeSeries
from borrowguard.load.runner import LoadPlan, LoadRun
from borrowguard.load.scenarios import RequestFactory, ScenarioSettings

__all__ = [
    "ChatClient",
    "LoadMetrics",
    "LoadPlan",
    "LoadRun",
    "LogHistogram",
    "Outcome",
    "RequestFactory",
    "ScenarioSettings",
    "TimeSeries",
]
