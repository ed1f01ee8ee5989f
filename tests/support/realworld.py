"""The reader of tests/fixtures/logs/real-world/: each excerpt with what it must and must not produce.

Shared by tests/scan/test_scan_recall.py (recall and precision), tests/knowledge/test_rules_export.py (the
exported rules on the same lines) and bench/scan_recall.py; the header format is described in the first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real-world"


@dataclass
class Case:
    path: Path
    body: str
    expect: dict[str, str] = field(default_factory=dict)
    reject: set[str] = field(default_factory=set)
    server: dict[str, str] = field(default_factory=dict)
    source: str = ""


def read_case(path: Path) -> Case:
    lines = path.read_text(encoding="utf-8").splitlines()
    header = [line[2:] for line in lines if line.startswith("# ")]
    case = Case(path, "".join(line + "\n" for line in lines if not line.startswith("# ")))
    for item in header:
        key, _, value = item.partition(": ")
        if key == "source":
            case.source = value
        elif key == "expect":
            problem, confidence = value.split()
            case.expect[problem] = confidence
        elif key == "reject":
            case.reject.add(value.strip())
        elif key == "server":
            case.server = dict(pair.split("=", 1) for pair in value.split())
    return case


@dataclass(frozen=True)
class CollectedSet:
    """A set of excerpts collected after the rules of its time and labelled before scan first read it: a
    measurement, not a specification (docs/scan-recall.md tells how each was collected and what it showed)."""

    name: str
    """What `bench/scan_recall.py --set` calls it."""
    directory: str
    """Its folder under tests/fixtures/logs/ (positive/ and near-miss/)."""
    as_collected: tuple[float, float]
    """Precision and recall the first time scan read it."""
    now: tuple[float, float]
    """Precision and recall since its lessons were learned: the figures may not fall below these."""
    still_false: tuple[str, ...] = ()
    """File-name prefixes of near-misses that scan still finds something they reject in (strict xfail: the
    test says so when one is fixed)."""


# In the order they were collected: each set's sources are new to every set above it.
COLLECTED = (
    CollectedSet("after-rules", "real-world-2", as_collected=(0.90, 0.90), now=(1.0, 1.0)),
    CollectedSet("held-out", "real-world-3", as_collected=(0.92, 0.65), now=(1.0, 0.94)),
    CollectedSet("held-out-2", "real-world-4", as_collected=(0.93, 0.76), now=(1.0, 1.0)),
    CollectedSet("held-out-3", "real-world-5", as_collected=(0.93, 0.77), now=(1.0, 1.0)),
    CollectedSet("held-out-4", "real-world-6", as_collected=(0.94, 0.80), now=(1.0, 1.0)),
    CollectedSet("held-out-5", "real-world-7", as_collected=(1.0, 0.81), now=(1.0, 1.0)),
    CollectedSet("held-out-6", "real-world-8", as_collected=(0.93, 0.74), now=(1.0, 1.0)),
    CollectedSet(
        "held-out-7", "real-world-9", as_collected=(0.88, 0.72), now=(0.97, 0.95), still_false=("transformers12550",),
    ),
    CollectedSet("held-out-8", "real-world-10", as_collected=(0.94, 0.69), now=(1.0, 0.93)),
    CollectedSet("held-out-9", "real-world-11", as_collected=(0.93, 0.71), now=(1.0, 0.95)),
    CollectedSet(
        "held-out-10", "real-world-12", as_collected=(0.91, 0.86), now=(0.97, 0.97), still_false=("datafusion-python1253",),
    ),
    CollectedSet(
        "held-out-11", "real-world-13", as_collected=(0.83, 0.78), now=(0.97, 1.0),
    ),
    CollectedSet(
        "held-out-12", "real-world-14", as_collected=(0.88, 0.77), now=(0.93, 0.97),
        still_false=("llm-llama-server2", "tei159"),
    ),
    CollectedSet(
        "held-out-13", "real-world-15", as_collected=(0.93, 0.74), now=(0.97, 1.00),
        still_false=("inference2267",),
    ),
    CollectedSet(
        "held-out-14", "real-world-16", as_collected=(0.90, 0.71), now=(0.97, 0.92),
    ),
    CollectedSet(
        "held-out-15", "real-world-17", as_collected=(0.92, 0.95), now=(1.0, 1.0),
    ),
    CollectedSet(
        "held-out-16", "real-world-18", as_collected=(0.86, 0.86), now=(0.95, 0.97),
        still_false=("lmcache1088",),
    ),
    CollectedSet(
        "held-out-17", "real-world-19", as_collected=(0.90, 0.76), now=(0.97, 0.95),
        still_false=("pytorch45950",),
    ),
    CollectedSet("held-out-18", "real-world-20", as_collected=(1.0, 0.68), now=(0.97, 0.97)),
    CollectedSet("held-out-19", "real-world-21", as_collected=(0.91, 0.78), now=(1.0, 1.0)),
    CollectedSet(
        "held-out-20", "real-world-22", as_collected=(0.82, 0.79), now=(0.97, 0.97),
        still_false=("textgen2569",),
    ),
    CollectedSet("held-out-21", "real-world-23", as_collected=(0.89, 0.70), now=(0.98, 0.91)),
    CollectedSet(
        "held-out-22", "real-world-24", as_collected=(0.94, 0.79), now=(0.95, 0.95),
        still_false=("spacy10649", "vllm6610"),
    ),
    CollectedSet(
        "held-out-23", "real-world-25", as_collected=(0.83, 0.69), now=(0.97, 0.92),
        still_false=("llmdinferencesim457",),
    ),
    CollectedSet(
        "held-out-24", "real-world-26", as_collected=(0.89, 0.84), now=(0.97, 1.00),
        still_false=("vllm53851",),
    ),
    CollectedSet(
        "held-out-25", "real-world-27", as_collected=(0.93, 0.74), now=(0.95, 0.95),
        still_false=("dynamo1655", "gpustack3189"),
    ),
    CollectedSet(
        "held-out-26", "real-world-28", as_collected=(0.94, 0.88), now=(0.94, 1.00),
        still_false=("vllm20783", "vllm2442"),
    ),
    CollectedSet(
        "held-out-27", "real-world-29", as_collected=(0.90, 0.70), now=(0.97, 0.95),
    ),
    CollectedSet(
        "held-out-28", "real-world-30", as_collected=(0.93, 0.71), now=(0.95, 0.97),
        still_false=("aitriad1227",),
    ),
    CollectedSet(
        "held-out-29", "real-world-31", as_collected=(0.93, 0.74), now=(1.00, 0.97),
    ),
    CollectedSet("held-out-30", "real-world-32", as_collected=(0.88, 0.72), now=(0.97, 0.95)),
    CollectedSet(
        "held-out-31", "real-world-33", as_collected=(0.94, 0.84), now=(0.97, 0.95),
        still_false=("vllm9046",),
    ),
    CollectedSet(
        "held-out-32", "real-world-34", as_collected=(0.93, 0.85), now=(0.97, 0.97),
        still_false=("zopdev312",),
    ),
    CollectedSet("held-out-33", "real-world-35", as_collected=(1.00, 0.69), now=(1.00, 0.86)),
    CollectedSet(
        "held-out-34", "real-world-36", as_collected=(0.85, 0.78), now=(0.92, 0.95),
        still_false=("ollama1516", "serge22", "spacy449"),
    ),
    CollectedSet(
        "held-out-35", "real-world-37", as_collected=(0.83, 0.69), now=(0.97, 0.94),
        still_false=("textgenerationinference1485",),
    ),
    CollectedSet(
        "held-out-36", "real-world-38", as_collected=(0.80, 0.82), now=(0.93, 0.93),
        still_false=("openviking793", "chromemgo108"),
    ),
    CollectedSet(
        "held-out-37", "real-world-39", as_collected=(0.91, 0.82), now=(0.93, 0.97),
        still_false=("verl224", "yals19"),
    ),
    CollectedSet(
        "held-out-38", "real-world-40", as_collected=(0.86, 0.84), now=(0.92, 0.97),
        still_false=("antgroupsglang31", "onyx5206", "talosargocdproxmox1766"),
    ),
    CollectedSet(
        "held-out-39", "real-world-41", as_collected=(0.86, 0.86), now=(0.95, 0.97),
        still_false=("dynamo8590", "mlxvlm1717"),
    ),
    CollectedSet(
        "held-out-40", "real-world-42", as_collected=(0.79, 0.81), now=(0.97, 0.97), still_false=("mmdetection2406",),
    ),
    CollectedSet(
        "held-out-41", "real-world-43", as_collected=(0.76, 0.85), now=(0.92, 0.97),
        still_false=("detectron24730", "pytorch107177", "speech14770"),
    ),
    CollectedSet(
        "held-out-42", "real-world-44", as_collected=(0.80, 0.94), now=(0.87, 1.00),
        still_false=("cortex1806", "k8sdeviceplugin106", "vllm34749"),
    ),
    CollectedSet(
        "held-out-43", "real-world-45", as_collected=(0.80, 0.85), now=(0.89, 0.94),
        still_false=("vllm37382", "wpaperd10"),
    ),
    CollectedSet(
        "held-out-44", "real-world-46", as_collected=(0.76, 0.89), now=(0.92, 1.00),
        still_false=("serve3342", "slint10112"),
    ),
    CollectedSet(
        "held-out-45", "real-world-47", as_collected=(0.90, 0.85), now=(0.97, 0.94),
        still_false=("inferencebenchmarker13",),
    ),
    CollectedSet(
        "held-out-46", "real-world-48", as_collected=(0.79, 0.86), now=(0.88, 1.00),
        still_false=("gimlet649", "gpuoperator331", "haystack1343", "kserve5063", "memorylancedbpro786"),
    ),
    CollectedSet(
        "held-out-47", "real-world-49", as_collected=(0.90, 0.72), now=(0.97, 0.94), still_false=("milvus18707",),
    ),
    CollectedSet(
        "held-out-48", "real-world-50", as_collected=(0.81, 0.76), now=(0.92, 0.89),
        still_false=("llamacpp20509", "nvidiacontainertoolkit30", "rehor191"),
    ),
    CollectedSet(
        "held-out-49", "real-world-51", as_collected=(0.79, 0.83), now=(0.88, 0.97),
        still_false=("gpustack2820", "kuberay4287", "llamacpp9271", "msswift6301"),
    ),
    CollectedSet(
        "held-out-50", "real-world-52", as_collected=(0.86, 0.81), now=(0.95, 1.00), still_false=("ttinferenceserver5034",),
    ),
    CollectedSet(
        "held-out-51", "real-world-53", as_collected=(0.81, 0.74), now=(0.94, 0.97), still_false=("turbohtml152",),
    ),
    CollectedSet(
        "held-out-52", "real-world-54", as_collected=(0.88, 0.83), now=(0.94, 0.94),
        still_false=("pytorchserve2338", "vllm9738"),
    ),
    CollectedSet(
        "held-out-53", "real-world-55", as_collected=(0.80, 0.91), now=(0.95, 1.00),
        still_false=("samplegenaioneksstarterkit11", "sregym61"),
    ),
    CollectedSet(
        "held-out-54", "real-world-56", as_collected=(0.90, 0.77), now=(0.95, 1.00),
        still_false=("assemblyzero399", "inference2235"),
    ),
    CollectedSet(
        "held-out-55", "real-world-57", as_collected=(0.86, 0.89), now=(1.00, 0.97),
    ),
    CollectedSet("held-out-56", "real-world-58", as_collected=(1.00, 0.72), now=(1.00, 0.97)),
    CollectedSet(
        "held-out-57", "real-world-59", as_collected=(0.88, 0.83), now=(0.95, 1.00), still_false=("tracecat3538",),
    ),
    CollectedSet(
        "held-out-58", "real-world-60", as_collected=(0.82, 0.89), now=(0.95, 0.95), still_false=("inferenceperf747",),
    ),
    CollectedSet(
        "held-out-59", "real-world-61", as_collected=(0.78, 0.76), now=(0.95, 0.95),
        still_false=("sglang24844", "vllm11902"),
    ),
    CollectedSet(
        "held-out-60", "real-world-62", as_collected=(0.80, 0.65), now=(0.97, 0.89), still_false=("lmdeploy2071",),
    ),
    CollectedSet("held-out-61", "real-world-63", as_collected=(0.84, 0.76), now=(0.94, 0.94)),
    CollectedSet("held-out-62", "real-world-64", as_collected=(0.89, 0.73), now=(0.97, 0.94)),
    CollectedSet(
        "held-out-63", "real-world-65", as_collected=(0.88, 0.83), now=(0.94, 0.94),
        still_false=("presidio2033", "vllm289"),
    ),
    CollectedSet(
        "held-out-64", "real-world-66", as_collected=(0.79, 0.79), now=(0.89, 0.94),
        still_false=("neuralquestiongeneration2", "pytorchserve2300"),
    ),
    CollectedSet(
        "held-out-65", "real-world-67", as_collected=(0.89, 0.84), now=(0.94, 0.92), still_false=("openpal336",),
    ),
    CollectedSet(
        "held-out-66", "real-world-68", as_collected=(0.68, 0.68), now=(0.89, 0.97),
        still_false=("keybert111", "livesplitonedruid2", "server3257", "textgen7257"),
    ),
    CollectedSet(
        "held-out-67", "real-world-69", as_collected=(0.86, 0.91), now=(0.90, 1.0),
        still_false=("olinfrastructure5162", "pytorch64241", "vllm1891"),
    ),
    CollectedSet(
        "held-out-68", "real-world-70", as_collected=(0.77, 0.83), now=(0.84, 0.89),
        still_false=("cnpfluxconfig28772", "opstrace1044", "vllm50282", "website46288"),
    ),
    CollectedSet("held-out-69", "real-world-71", as_collected=(0.91, 0.86), now=(0.97, 1.0)),
    CollectedSet("held-out-70", "real-world-72", as_collected=(0.88, 0.82), now=(0.94, 0.97)),
    CollectedSet(
        "held-out-71", "real-world-73", as_collected=(0.82, 0.82), now=(0.89, 0.94),
        still_false=("elasticdl1574", "inferencedevnetdocs36", "textgenerationinference34"),
    ),
    CollectedSet("held-out-72", "real-world-74", as_collected=(0.84, 0.91), now=(0.97, 0.97)),
    CollectedSet(
        "held-out-73", "real-world-75", as_collected=(0.82, 0.73), now=(0.87, 0.92),
        still_false=("azuredatabricksoperator62", "modelzllm69"),
    ),
    CollectedSet(
        "held-out-74", "real-world-76", as_collected=(0.89, 0.78), now=(0.97, 1.0), still_false=("imp890",),
    ),
    CollectedSet(
        "held-out-75", "real-world-77", as_collected=(0.84, 0.91), now=(0.92, 1.0),
        still_false=("gateway6068", "hal01969", "trackfish4"),
    ),
    CollectedSet(
        "held-out-76", "real-world-78", as_collected=(0.91, 0.83), now=(1.0, 1.0),
    ),
    CollectedSet(
        "held-out-77", "real-world-79", as_collected=(0.90, 0.77), now=(0.97, 0.97),
        still_false=("elasticsearch116796",),
    ),
    CollectedSet(
        "held-out-78", "real-world-80", as_collected=(0.80, 0.73), now=(0.83, 0.91),
        still_false=("azuremlexamples3913", "datascienceongcp154", "llmdbenchmark285"),
    ),
    CollectedSet(
        "held-out-79", "real-world-81", as_collected=(0.84, 0.79), now=(0.94, 0.88),
        still_false=("caikittgisserving92",),
    ),
    CollectedSet(
        "held-out-80", "real-world-82", as_collected=(0.93, 0.79), now=(0.97, 0.91), still_false=("llamacpp5156",),
    ),
    CollectedSet(
        "held-out-81", "real-world-83", as_collected=(0.85, 0.72), now=(0.91, 0.91),
        still_false=("immich5958", "sozu529"),
    ),
    CollectedSet(
        "held-out-82", "real-world-84", as_collected=(0.92, 0.85), now=(0.96, 0.92), still_false=("orjson415",),
    ),
    CollectedSet(
        "held-out-83", "real-world-85", as_collected=(0.78, 0.78), now=(0.86, 1.0),
        still_false=("labelstudio9550", "qwenvlseriesfinetune135", "sregym781", "tantivy2634", "vllm40855"),
    ),
    CollectedSet(
        "held-out-84", "real-world-86", as_collected=(0.74, 0.81), now=(0.86, 0.97),
        still_false=("monaiphysio126", "opensecret193"),
    ),
    CollectedSet(
        "held-out-85", "real-world-87", as_collected=(0.84, 0.79), now=(0.89, 0.97),
        still_false=("azureserviceoperator298", "mlxserve326", "ruffle1498", "website36064"),
    ),
    CollectedSet(
        "held-out-86", "real-world-88", as_collected=(0.82, 0.82), now=(0.88, 0.88),
        still_false=("flair855", "infinity757", "operatorsdksamples156", "spacy1986"),
    ),
    CollectedSet(
        "held-out-87", "real-world-89", as_collected=(0.80, 0.91), now=(0.85, 0.97),
        still_false=("agentaboutanswer28", "dify17807", "kong732", "llamacpp6739", "qaconv19", "vllm35034"),
    ),
    CollectedSet(
        "held-out-88", "real-world-90", as_collected=(0.87, 0.79), now=(0.89, 0.94),
        still_false=("darkflow386", "inference2009", "kubernetes19825"),
    ),
    CollectedSet(
        "held-out-89", "real-world-91", as_collected=(0.86, 0.88), now=(0.87, 0.97),
        still_false=("kubernetes3044", "kubernetes93575", "litellm27003"),
    ),
    CollectedSet(
        "held-out-90", "real-world-92", as_collected=(0.81, 0.88), now=(0.89, 1.0),
        still_false=("kubeeventer285", "kubernetes98157", "primerl1999", "ray33157"),
    ),
    CollectedSet(
        "held-out-91", "real-world-93", as_collected=(0.86, 0.76), now=(0.89, 0.97),
        still_false=("amazonqdevelopercli2503", "dockerstacks736", "origin5417"),
    ),
    CollectedSet(
        "held-out-92", "real-world-94", as_collected=(0.84, 0.91), now=(0.87, 0.97),
        still_false=("flytesdk698", "grin453", "ray60088"),
    ),
    CollectedSet(
        "held-out-93", "real-world-95", as_collected=(0.93, 0.82), now=(0.97, 0.94), still_false=("kuberay852",),
    ),
    CollectedSet(
        "held-out-94", "real-world-96", as_collected=(0.77, 0.86), now=(0.87, 0.97),
        still_false=("dragonflyoperator42", "fastvideo1259", "internlm421", "ironcalc341", "lilbee245"),
    ),
    CollectedSet(
        "held-out-95", "real-world-97", as_collected=(0.91, 0.84), now=(0.94, 0.89),
        still_false=("k8scookbook1308", "pelagos343"),
    ),
    CollectedSet(
        "held-out-96", "real-world-98", as_collected=(0.88, 0.78), now=(0.92, 0.89),
        still_false=("k3s7746", "ohmypi12449"),
    ),
    CollectedSet(
        "held-out-97", "real-world-99", as_collected=(0.75, 0.73), now=(0.88, 0.88),
        still_false=("difykubernetes34", "inference4363", "obsidianchinesepluginmarket29"),
    ),
    CollectedSet(
        "held-out-98", "real-world-100", as_collected=(0.92, 1.0), now=(0.94, 1.0), still_false=("litellm20697",),
    ),
    CollectedSet("held-out-99", "real-world-101", as_collected=(1.0, 0.70), now=(1.0, 0.78)),
    CollectedSet(
        "held-out-100", "real-world-102", as_collected=(0.86, 0.79), now=(0.92, 0.92),
        still_false=("aipoweredsearch49", "rbert6", "talk2arxiv4"),
    ),
    CollectedSet("held-out-101", "real-world-103", as_collected=(0.84, 0.82), now=(1.0, 0.91)),
    CollectedSet(
        "held-out-102", "real-world-104", as_collected=(0.86, 0.94), now=(0.89, 1.0),
        still_false=("flowise2215", "llmdbenchmark1615", "lmdeploy2895"),
    ),
    CollectedSet(
        "held-out-103", "real-world-105", as_collected=(0.90, 0.75), now=(0.91, 0.89),
        still_false=("cre137", "exllamav2504", "getiv2146"),
    ),
    CollectedSet("held-out-104", "real-world-106", as_collected=(0.82, 0.80), now=(0.97, 0.94)),
    CollectedSet(
        "held-out-105", "real-world-107", as_collected=(0.88, 0.68), now=(0.94, 0.85), still_false=("rccl1026",),
    ),
    CollectedSet("held-out-106", "real-world-108", as_collected=(0.90, 0.77), now=(1.0, 0.89)),
    CollectedSet("held-out-107", "real-world-109", as_collected=(0.91, 0.86), now=(1.0, 0.97)),
    CollectedSet(
        "held-out-108", "real-world-110", as_collected=(0.93, 0.76), now=(0.94, 0.94), still_false=("vllm322", "volcano4941"),
    ),
    CollectedSet(
        "held-out-109", "real-world-111", as_collected=(0.93, 0.69), now=(0.97, 0.89), still_false=("kubernetes122256",),
    ),
    CollectedSet(
        "held-out-110", "real-world-112", as_collected=(0.88, 0.85), now=(0.94, 0.97),
        still_false=("hermesagent102058", "vllm6370"),
    ),
    CollectedSet(
        "held-out-111", "real-world-113", as_collected=(0.74, 0.8), now=(0.85, 0.94),
        still_false=("deerflow5505", "docling773", "paddleocr11778", "productionstack687", "productionstack878"),
    ),
    CollectedSet("held-out-112", "real-world-114", as_collected=(0.89, 0.91), now=(1.0, 1.0)),
    CollectedSet("held-out-113", "real-world-115", as_collected=(0.97, 0.76), now=(1.0, 0.89)),
    CollectedSet("held-out-114", "real-world-116", as_collected=(0.93, 0.72), now=(1.0, 0.92)),
    CollectedSet(
        "held-out-115", "real-world-117", as_collected=(0.89, 0.84), now=(0.92, 0.95), still_false=("apisix13852",),
    ),
    CollectedSet("held-out-116", "real-world-118", as_collected=(0.89, 0.69), now=(1.0, 0.92)),
    CollectedSet(
        "held-out-117", "real-world-119", as_collected=(0.88, 0.81), now=(0.89, 0.92),
        still_false=("contextengine52", "kubeflowmanifests38", "modalclient3848", "submarine621"),
    ),
)
