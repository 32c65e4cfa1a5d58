"""Trace readers: every layout, arrival units, zero clamping and one-line row errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fleetplan.errors import DataFormatError
from fleetplan.workload import TraceFormat, read_trace


def _csv(tmp_path, text, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_azure_timestamps_with_seven_fractional_digits(tmp_path):
    p = _csv(
        tmp_path,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:17:03.9799600,4808,10\n"
        "2023-11-16 18:17:04.0319600,3180,8\n"
        "2023-11-16 18:17:05,110,27\n",
    )
    tr = read_trace(p)
    assert tr.format is TraceFormat.AZURE_2023
    np.testing.assert_allclose(tr.arrival_s, [0.0, 0.052, 1.02004], atol=1e-9)
    np.testing.assert_array_equal(tr.prompt_tokens, [4808, 3180, 110])
    np.testing.assert_array_equal(tr.output_tokens, [10, 8, 27])
    assert tr.arrival_rate_per_s == pytest.approx(2 / 1.02004)


def test_burstgpt_seconds_and_zero_response_clamped(tmp_path):
    p = _csv(
        tmp_path,
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "7.5,GPT-4,1087,0,1087,Conversation log\n"
        "9,ChatGPT,31,200,231,API log\n",
    )
    tr = read_trace(p)
    assert tr.format is TraceFormat.BURSTGPT
    np.testing.assert_allclose(tr.arrival_s, [0, 2.5, 4.0])
    np.testing.assert_array_equal(tr.output_tokens, [18, 1, 200])
    assert tr.n_zero_clamped == 1


def test_mooncake_jsonl_milliseconds(tmp_path):
    lines = [
        {"timestamp": 1000, "input_length": 6955, "output_length": 52, "hash_ids": [0, 1]},
        {"timestamp": 1500, "input_length": 6472, "output_length": 26, "hash_ids": [0]},
        {"timestamp": 4000, "input_length": 100, "output_length": 3, "hash_ids": []},
    ]
    p = tmp_path / "m.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    tr = read_trace(p)
    assert tr.format is TraceFormat.MOONCAKE
    np.testing.assert_allclose(tr.arrival_s, [0, 0.5, 3.0])
    np.testing.assert_array_equal(tr.prompt_tokens, [6955, 6472, 100])


def test_vidur_and_plain_csv(tmp_path):
    v = read_trace(
        _csv(
            tmp_path,
            "id,arrived_at,num_prefill_tokens,num_decode_tokens\n0,0.5,100,10\n1,0.75,200,20\n",
            "v.csv",
        )
    )
    assert v.format is TraceFormat.VIDUR
    np.testing.assert_allclose(v.arrival_s, [0, 0.25])
    plain = read_trace(_csv(tmp_path, "arrival_s,prompt_tokens,output_tokens\n0,10,5\n2,20,6\n", "p.csv"))
    assert plain.format is TraceFormat.PLAIN
    np.testing.assert_array_equal(plain.total_tokens, [15, 26])
    assert plain.duration_s == 2.0


@pytest.mark.parametrize(
    ("body", "where", "rule"),
    [
        ("0,10,5\n1,abc,6\n", "line 3", "not a number"),
        ("0,10,5\n1,-3,6\n", "line 3", "negative"),
        ("0,10,5\n1,10.5,6\n", "line 3", "not an integer"),
        ("0,10,5\n1,10\n", "line 3", "not a number"),
        ("0,10,5\n2,10,6\n1,10,6\n", "line 4", "earlier than the previous row"),
        ("0,10,5\nx,10,6\n", "line 3", "arrival_s is 'x'"),
        ("0,10,5\n1,10,6,7\n", "", "malformed CSV"),
        ("", "", "no rows"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path, body, where, rule):
    p = _csv(tmp_path, "arrival_s,prompt_tokens,output_tokens\n" + body)
    with pytest.raises(DataFormatError, match=rule) as info:
        read_trace(p)
    msg = str(info.value)
    assert msg.startswith(str(p)) and where in msg and "\n" not in msg


def test_unknown_header_and_bad_jsonl(tmp_path):
    with pytest.raises(DataFormatError, match="match no known trace format"):
        read_trace(_csv(tmp_path, "a,b,c\n1,2,3\n"))
    with pytest.raises(DataFormatError, match="empty"):
        read_trace(_csv(tmp_path, ""))
    p = tmp_path / "m.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 1, "output_length": 1}\n{"timestamp": 5, \n')
    with pytest.raises(DataFormatError, match=r"line 2, column \d+.*malformed JSON"):
        read_trace(p)
    p.write_text(
        '{"timestamp": 0, "input_length": 1, "output_length": 1}\n{"timestamp": 5, "input_length": 1}\n'
    )
    with pytest.raises(DataFormatError, match="line 2.*output_length is ''"):
        read_trace(p)


def test_bad_azure_timestamp(tmp_path):
    p = _csv(tmp_path, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,1,1\nyesterday,1,1\n")
    with pytest.raises(DataFormatError, match="line 3.*not a date-time"):
        read_trace(p)


def test_real_azure_traces(shared_dir):
    base = shared_dir / "traces" / "azure2023"
    conv = read_trace(base / "AzureLLMInferenceTrace_conv.csv")
    code = read_trace(base / "AzureLLMInferenceTrace_code.csv")
    assert (conv.n_requests, code.n_requests) == (19366, 8819)
    # the 2023 traces have no zero-token rows
    assert conv.n_zero_clamped == 0 and code.n_zero_clamped == 0
    assert conv.duration_s == pytest.approx(3501.721937, abs=1e-6)
    assert conv.arrival_rate_per_s == pytest.approx(19365 / 3501.721937)
    assert np.all(np.diff(conv.arrival_s) >= 0)
