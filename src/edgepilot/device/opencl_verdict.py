"""Would ggml's OpenCL backend use this OpenCL device, and which weight types is it fast for?

The rules are ggml-opencl's own (ggml/src/ggml-opencl/ggml-opencl.cpp of the vendored llama.cpp,
`ggml_opencl_is_device_supported`): the device name contains "Adreno" or "Qualcomm", or its version string
"Adreno" (Adreno), else "Intel" (Intel), else it is dropped ("unsupported GPU"); OpenCL C 2.0 or newer;
`cl_khr_fp16`; on OpenCL C 3.x `cl_khr_subgroups` (or `cl_intel_subgroups`). The default build (Termux's
too) has GGML_OPENCL_USE_ADRENO_KERNELS on, which refuses every non-Adreno device. The Adreno generation
is ggml's `get_adreno_gpu_gen` table (version string first, then the name) and the compiler version its
`get_adreno_cl_compiler_version` reading of the driver string (`E031.45.02.06`: type E031, 45.2.6).

Facts from outside the source: compilers up to E031.38.01 cannot build the kernels (llama.cpp PR #12886,
"compilers newer than E031.38.01.00 should work"; docs/backend/OPENCL.md: "A6x GPUs in phones are likely not
supported due to the outdated driver and compiler"). Speed by weight type: the Adreno kernels were built for
Q4_0 (PR #10693, the docs' former advice: `llama-quantize --pure` to Q4_0) and later got GEMM/GEMV kernels
for Q8_0 (PR #18871) and Q4_1 (PR #19840); K-quants run, but slower: "Q4_K_M is still slow" (PR #20089,
Q6_K kernels), decode ~25% behind Q4_0/Q8_0 (qualcomm/GenieX#1225). In the vendored source Q5_0, Q5_1 and
MXFP4 have no Adreno GEMM (a prompt batch of 512+ rows runs on the CPU), and types outside the MUL_MAT list
(Q2_K, Q3_K, most IQ types) run on the CPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FAST_TYPES = ("Q4_0", "Q8_0", "Q4_1")  # Adreno GEMM + GEMV kernels, measured at par (GenieX#1225)
SLOWER_TYPES = ("Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "Q5_0", "Q5_1", "MXFP4", "Q1_0", "F16", "BF16", "F32")
RECOMMENDED = "Q4_0"
# ggml-opencl's get_adreno_gpu_gen: the model numbers it knows, by generation
_GENERATIONS = (
    ("6xx", ("610", "612", "613", "615", "616", "618", "619", "620", "630", "640", "642", "643", "644",
             "650", "660", "663", "680", "685", "690")),
    ("7xx", ("730", "740", "750")),
    ("8xx", ("810", "830", "840", "850")),
    ("X1", ("X1",)),
    ("X2", ("X2",)),
)  # fmt: skip
_COMPILERS = (("E031", 13, (5, 8, 11)), ("E17", 12, (4, 7, 10)), ("DX", 11, (3, 6, 9)))
OLDEST_WORKING = (38, 1, 0)  # E031.38.01: the vendored ggml-opencl works around its two failing kernels
_MODEL = r"Adreno\s*\(TM\)\s*(X\d-\d+|\d{3})"  # compiled on first use (re's cache)


@dataclass
class Judgement:
    family: str  # adreno | intel | other
    supported: bool | None  # None: not enough facts to tell
    reasons: list[str] = field(default_factory=list)
    generation: str | None = None  # 6xx | 7xx | 8xx | X1 | X2 (ggml's table), None when it does not know
    model: str | None = None  # "750", "X1-85"
    compiler: str | None = None  # "E031.45.02.06"
    fast_types: list[str] = field(default_factory=list)
    slower_types: list[str] = field(default_factory=list)
    recommended_quant: str | None = None


def generation(text: str) -> str | None:
    """ggml's get_adreno_gpu_gen: the first generation whose model number the text contains."""
    for gen, numbers in _GENERATIONS:
        if any(n in text for n in numbers):
            return gen
    return None


def compiler_version(driver: str | None) -> tuple[str, tuple[int, int, int]] | None:
    """ggml's get_adreno_cl_compiler_version: ("E031.45.02.06", (45, 2, 6)); None when the driver string
    names no E031, E17 or DX compiler."""
    if not driver:
        return None
    for prefix, length, offsets in _COMPILERS:
        at = driver.find(prefix)
        if at < 0:
            continue
        text = driver[at : at + length]
        numbers = tuple(_atoi(text[o : o + 2]) for o in offsets)
        return text, (numbers[0], numbers[1], numbers[2])
    return None


def _atoi(text: str) -> int:
    m = re.match(r"\d+", text)
    return int(m.group(0)) if m else 0


def c_version(text: str | None) -> tuple[int, int] | None:
    """`OpenCL C 3.0 Adreno(TM) 750` -> (3, 0)."""
    m = re.match(r"\s*OpenCL C (\d{1,3})\.(\d{1,3})", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def family_of(name: str, device_version: str) -> str:
    if "Adreno" in name or "Qualcomm" in name or "Adreno" in device_version:
        return "adreno"
    if "Intel" in name:
        return "intel"
    return "other"


def judge(
    name: str, device_version: str, c_text: str | None, driver: str | None, exts: set[str]
) -> Judgement:
    """ggml-opencl's verdict on one device, with the reasons in words."""
    fam = family_of(name, device_version)
    if fam == "other":
        why = f"ggml-opencl supports Adreno and Intel GPUs only: it drops '{name}' ('unsupported GPU')"
        if name.lower().startswith(("mali", "immortalis")):
            why += "; Mali runs llama.cpp through Vulkan or the CPU"
        return Judgement(fam, False, [why])
    j = Judgement(fam, True)
    cv = c_version(c_text)
    if cv is None:
        j.supported = None
        j.reasons.append("OpenCL C version unknown: ggml-opencl needs 2.0 or newer")
    elif cv[0] < 2:
        j.supported = False
        j.reasons.append(f"OpenCL C {cv[0]}.{cv[1]}: ggml-opencl needs 2.0 or newer")
    if "cl_khr_fp16" not in exts:
        j.supported = False
        j.reasons.append("no cl_khr_fp16: ggml-opencl needs half precision")
    if cv is not None and cv[0] == 3 and not exts & {"cl_khr_subgroups", "cl_intel_subgroups"}:
        j.supported = False
        j.reasons.append("OpenCL C 3.0 without cl_khr_subgroups: ggml-opencl needs subgroups")
    if fam == "intel":
        j.reasons.append(
            "Intel: only a build with -DGGML_OPENCL_USE_ADRENO_KERNELS=OFF takes it (the default build and "
            "Termux's refuse non-Adreno GPUs); slower than llama.cpp's SYCL or Vulkan there"
        )
        return j
    _adreno(j, name, device_version, driver)
    return j


def _adreno(j: Judgement, name: str, device_version: str, driver: str | None) -> None:
    j.generation = generation(device_version) or generation(name)
    m = re.search(_MODEL, device_version, re.I) or re.search(_MODEL, name, re.I)
    j.model = m.group(1) if m else None
    found = compiler_version(driver)
    if found is not None:
        j.compiler = found[0]
        if found[0].startswith("E031") and found[1] < OLDEST_WORKING:
            j.supported = False
            j.reasons.append(
                f"compiler {found[0]} is older than E031.38.01: ggml-opencl's kernels need 38.01 or newer "
                "(llama.cpp PR #12886; before 38.11 it skips two kernels it does not use on Adreno); a "
                "driver update may bring one"
            )
    else:
        j.reasons.append("the driver string names no compiler version (E031.xx.xx.xx)")
    if j.generation is None:
        shown = f"Adreno {j.model}" if j.model else "this Adreno"
        j.reasons.append(f"{shown} is not in ggml's generation table: its per-generation tuning is off")
    elif j.generation == "6xx":
        j.reasons.append("Adreno 6xx: docs/backend/OPENCL.md expects phones' drivers to be too old")
    elif j.generation == "7xx":
        j.reasons.append(
            "Adreno 7xx: ggml-opencl keeps a K-quant output matrix of 32768+ rows and flash attention "
            "with f16/quantized KV on the CPU (their compiler miscompiles or crashes)"
        )
    if j.supported is not False:
        j.fast_types = list(FAST_TYPES)
        j.slower_types = list(SLOWER_TYPES)
        j.recommended_quant = RECOMMENDED


def speed_of(type_name: str, j: Judgement) -> str:
    """fast | slower | cpu: how ggml-opencl multiplies weights of this type on the device judged."""
    if type_name in j.fast_types:
        return "fast"
    if type_name in j.slower_types:
        return "slower"
    return "cpu"
