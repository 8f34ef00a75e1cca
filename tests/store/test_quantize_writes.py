"""What `quantize` and `compare` write, with real llama.cpp on the real SmolLM2 135M: an output named like its
source is refused before a byte is written (the source's bytes intact), a stale `NAME.part` symlink is never
written through, a vocabulary-only file is not "quantized", and compare's --plot and data folder are checked
before any measuring (one line, exit 2)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import gguf
from edgepilot.cli import app
from edgepilot.errors import UserError
from edgepilot.gguf.gguf_header import read_header
from edgepilot.gguf.gguf_info import file_type_name
from edgepilot.store.compare import compare_models
from edgepilot.store.quantize import quantize_model


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line_exit_2(args: list[str], message: str) -> str:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert message in res.stderr, res.stderr
    return res.stderr


@pytest.fixture(scope="module")
def f16(smollm_path, tmp_path_factory) -> Path:
    """`--to F16` of the Q4_1 model: the F16 reference is that variant (made once, not twice)."""
    out = tmp_path_factory.mktemp("f16")
    result = quantize_model(str(smollm_path), ["F16"], out_dir=str(out), threads=2)
    assert [v.path for v in result.variants] == [result.reference]
    assert sorted(p.name for p in out.iterdir()) == ["SmolLM2-135M-Instruct-F16.gguf"]
    return Path(result.reference)


def test_f16_of_a_quantized_source_is_its_reference(f16):
    assert file_type_name(read_header(f16).metadata["general.file_type"]) == "F16"


@pytest.fixture
def copied(smollm_path, tmp_path) -> Path:
    """The real Q4_1 model under a name of our choosing (renamed by each case)."""
    path = tmp_path / "src" / "m.gguf"
    path.parent.mkdir()
    shutil.copyfile(smollm_path, path)
    return path


@pytest.mark.parametrize(
    ("name", "to"),
    [
        ("m-Q8_0.gguf", "Q8_0"),  # the variant's name is the source's
        ("m-Q4_0.gguf", "Q8_0,q4_0"),  # the second variant's name is the source's: nothing written first
        ("m-F16.gguf", "Q4_0"),  # a quantized file named -F16: the F16 reference's name is the source's
    ],
)
def test_an_output_named_like_its_source_is_refused(copied, smollm_path, name, to):
    source = copied.rename(copied.with_name(name))
    one_line_exit_2(["quantize", str(source), "--to", to, "--force"], "would replace the source model")
    assert _sha256(source) == _sha256(smollm_path)
    assert [p.name for p in source.parent.iterdir()] == [name]  # no reference, no variant, no temporary


def test_f16_over_an_f16_source_is_refused(f16):
    before = _sha256(f16)
    one_line_exit_2(["quantize", str(f16), "--to", "F16", "--force"], "would replace the source model")
    assert _sha256(f16) == before


def test_an_output_linked_to_the_source_is_refused(f16, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "SmolLM2-135M-Instruct-Q4_0.gguf").symlink_to(f16)
    before = _sha256(f16)
    one_line_exit_2(
        ["quantize", str(f16), "--to", "Q4_0", "--out", str(out), "--force"], "would replace the source model"
    )
    assert _sha256(f16) == before


def test_a_stale_part_symlink_is_not_written_through(f16, tmp_path, monkeypatch):
    """NAME.part was the quantizer's fixed output name; a link there to a file elsewhere had that file
    truncated and written. Also: quantize does not need the data folder (here a file)."""
    victim = tmp_path / "elsewhere.bin"
    victim.write_bytes(b"precious bytes")
    out = tmp_path / "out"
    out.mkdir()
    (out / "SmolLM2-135M-Instruct-Q4_0.gguf.part").symlink_to(victim)
    data = tmp_path / "data-is-a-file"
    data.write_text("x")
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(data))
    res = CliRunner().invoke(app, ["quantize", str(f16), "--to", "Q4_0", "--out", str(out), "-t", "2"])
    assert res.exit_code == 0, res.output
    assert victim.read_bytes() == b"precious bytes"
    made = out / "SmolLM2-135M-Instruct-Q4_0.gguf"
    assert file_type_name(read_header(made).metadata["general.file_type"]) == "Q4_0"
    assert sorted(p.name for p in out.iterdir()) == [made.name, made.name + ".part"]


def test_a_device_at_an_output_name_is_refused_even_with_force(f16, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "SmolLM2-135M-Instruct-Q4_0.gguf")
    args = ["quantize", str(f16), "--to", "Q4_0", "--out", str(out), "--force"]
    one_line_exit_2(args, "not a regular file")


def _vocab_only(path: Path) -> Path:
    """A GGUF with a vocabulary and the keys llama.cpp needs, and no tensor at all."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_context_length(128)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(7)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([b"a", b"b", b"c"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_vocabulary_only_model_is_not_quantized(tmp_path):
    source = _vocab_only(tmp_path / "vocab-Q8_0.gguf")
    one_line_exit_2(["quantize", str(source), "--to", "Q4_0"], "no tensors")
    assert [p.name for p in tmp_path.iterdir()] == [source.name]


def test_compare_plot_needs_a_png_name(smollm_path, tmp_path):
    one_line_exit_2(["compare", str(smollm_path), "--plot", str(tmp_path / "x.txt")], ".png")
    os.mkfifo(tmp_path / "p.png")
    one_line_exit_2(["compare", str(smollm_path), "--plot", str(tmp_path / "p.png")], "not a regular file")


def test_compare_with_a_data_folder_that_is_a_file(smollm_path, tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.write_text("x")
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(data))
    in_the_way = f"cannot write scratch files in {data}: not a directory; set EDGEPILOT_DATA_DIR"
    one_line_exit_2(["compare", str(smollm_path)], in_the_way)
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(data / "below"))
    one_line_exit_2(["compare", str(smollm_path)], in_the_way)


def _compare_in(data: str, model: str) -> str:
    os.environ["EDGEPILOT_DATA_DIR"] = data
    try:
        compare_models([model])
    except UserError as exc:
        return str(exc)
    return "measured"


def test_compare_with_a_read_only_data_folder(smollm_path, open_tmp, unprivileged):
    data = open_tmp / "data"
    data.mkdir()
    data.chmod(0o555)
    message = unprivileged(_compare_in, str(data), str(smollm_path))
    assert f"cannot write scratch files in {data}: permission denied; make it yours" in message
    assert "\n" not in message
