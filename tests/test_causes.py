"""Root causes (harness/causes.py): the detail leads with the innermost exception and where it was raised; one bug
is one signature across ops; a dead worker's own output names its crash."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.causes import Crash, chain, describe, fatal_cause, signature
from harness.stages import error_info


def _wrapped(size: int) -> BaseException:
    def get_param_tensor() -> None:
        raise RuntimeError(f"unsupported param type, call_function; size {size}")

    try:
        try:
            get_param_tensor()
        except RuntimeError as exc:
            raise Exception("An error occurred when running the '_ExportedProgramGraphPassAdapter' pass after the "
                            "following passes: ['A', 'B']\nmore text") from exc
    except Exception as outer:
        return outer
    raise AssertionError("unreachable")


def test_the_detail_leads_with_the_root_cause_and_where_it_was_raised() -> None:
    rtype, message, where = describe(_wrapped(3))
    assert rtype == "RuntimeError" and where.endswith(" in get_param_tensor") and "test_causes.py:" in where
    first = message.splitlines()[0]
    assert first.startswith("RuntimeError: unsupported param type, call_function; size 3 (raised at ")
    assert first.endswith("; wrapped by Exception: An error occurred when running the '_ExportedProgramGraphPassAdapter' "
                          "pass after the following passes: ['A', 'B']")
    info = error_info(_wrapped(3))
    assert info.type == "RuntimeError" and info.message == message
    assert info.trace.startswith("the chain, outermost first:\n  Exception: An error occurred") and "in get_param_tensor" in info.trace
    assert len(chain(_wrapped(3))) == 2


def test_one_bug_is_one_signature_whatever_the_numbers() -> None:
    a, b = error_info(_wrapped(3)), error_info(_wrapped(40))
    assert a.signature == b.signature == "RuntimeError: unsupported param type, call_function; size N @ " \
        + a.signature.split(" @ ", 1)[1] and a.signature.endswith(":get_param_tensor")
    assert signature("IndexError", "IndexError: tuple index out of range") != signature("KeyError", "KeyError: 'x'")
    try:
        raise ValueError("plain")
    except ValueError as exc:
        plain = error_info(exc)
    assert plain.message.startswith("ValueError: plain (raised at ") and "wrapped by" not in plain.message


def test_a_dead_workers_output_names_its_cause() -> None:
    log = """[cpuinfo_utils.cpp:125] CPU info and manual query on # of cpus dont match.
[op_quantize.cpp:427] In function quantize_per_channel_out(), assert failed (scale.scalar_type() == ScalarType::Double): x
Fatal Python error: Aborted

Thread 0x00007f01 (most recent call first):
  File "/x/threading.py", line 320 in wait

Current thread 0x00007f00 (most recent call first):
  File "/x/executorch/runtime/__init__.py", line 120 in execute
  File "/w/harness/backends/executorch.py", line 400 in run

Extension modules: numpy (total: 1)
"""
    cause, frames = fatal_cause(log)
    assert cause.startswith("[op_quantize.cpp:427] In function quantize_per_channel_out(), assert failed")
    assert frames == ('File "/x/executorch/runtime/__init__.py", line 120 in execute',
                      'File "/w/harness/backends/executorch.py", line 400 in run')
    cause, _ = fatal_cause("terminate called after throwing an instance of 'c10::Error'\n  what():  bad alloc\n")
    assert cause == "terminate called after throwing an instance of 'c10::Error' what():  bad alloc"
    assert fatal_cause("Fatal Python error: Segmentation fault\n") == ("", ())  # the signal restated: nothing more
    assert fatal_cause("Fatal Python error: PyThreadState_Get: no current thread\n")[0].endswith("no current thread")
    # no fatal line, only the signal and faulthandler's frames (vela's SIGFPE): the innermost frame says where
    vela = """Fatal Python error: Floating point exception

Current thread 0x00007fad (most recent call first):
  File "/v/lib/python3.11/site-packages/ethosu/vela/vela.py", line 137 in process_regor
  File "/v/lib/python3.11/site-packages/executorch/backends/arm/arm_vela.py", line 123 in run
"""
    cause, frames = fatal_cause(vela)
    crash = Crash("SIGFPE", cause, frames, "/o/logs/worker-1.log")
    assert cause == "" and crash.where == "ethosu/vela/vela.py:137 in process_regor"
    assert crash.signature == "CRASH: SIGFPE @ ethosu/vela/vela.py:process_regor"
    assert Crash("SIGSEGV").where == "" and Crash("SIGSEGV").signature == "CRASH: SIGSEGV"
    # glibc's heap check aborting in a runtime's own (non-Python) thread: its line is the cause, and the one Python
    # thread not idle in a pool is where the program was (OpenVINO's compile_model on ALBERT)
    heap = """INFO:root:Copying constant nodes b__scale_2 and creating b__scale_2_copy_0
malloc(): unaligned tcache chunk detected
Fatal Python error: Aborted

Thread 0x00007f62deafe6c0 (most recent call first):
  File "/p/lib/python3.11/concurrent/futures/thread.py", line 81 in _worker
  File "/p/lib/python3.11/threading.py", line 982 in run

Thread 0x00007f63bd3feb80 (most recent call first):
  File "/v/lib/python3.11/site-packages/openvino/_ov_api.py", line 610 in compile_model
  File "/v/lib/python3.11/site-packages/executorch/backends/openvino/preprocess.py", line 57 in preprocess

Extension modules: numpy.core._multiarray_umath (total: 1)
"""
    cause, frames = fatal_cause(heap)
    crash = Crash("SIGABRT", cause, frames, "/o/logs/worker-2.log")
    assert cause == "malloc(): unaligned tcache chunk detected" and crash.where == "openvino/_ov_api.py:610 in compile_model"
    assert crash.signature == "CRASH: malloc(): unaligned tcache chunk detected @ openvino/_ov_api.py:compile_model"
    assert fatal_cause("double free or corruption (out)\n")[0] == "double free or corruption (out)"
    assert fatal_cause("*** stack smashing detected ***: terminated\n")[0].startswith("*** stack smashing")
    # two busy Python threads: which one called into the crash is not known, so no frame is claimed
    two = heap.replace("concurrent/futures/thread.py", "site-packages/x/a.py")
    assert fatal_cause(two)[1] == ()


def test_a_message_that_carries_its_type_is_not_prefixed_twice_and_bti_paths_are_short() -> None:
    from harness.providers import ProviderError

    try:
        raise ProviderError("ProviderError: load: Failed to load method forward, error: 0x:20")
    except ProviderError as exc:
        _, message, _ = describe(exc)
    assert message.startswith("ProviderError: load: Failed to load method forward, error: 0x:20 (raised at ")
    from harness.errors import RecipeError
    from harness.recipes import load_recipe

    try:
        load_recipe("no-such-recipe")
    except RecipeError as exc:
        _, _, where = describe(exc)
    assert where.startswith("harness/recipes.py:") and where.endswith(" in load_recipe"), where  # bti's own: from harness/


def test_a_failed_tool_is_named_by_its_program_and_what_it_said_not_its_temporary_paths() -> None:
    def compile_with(tmp: str) -> BaseException:
        try:
            try:
                raise subprocess.CalledProcessError(
                    255, ["/venv/bin/model-converter", "-i", f"/tmp/{tmp}/output.tosa"], output=b"",
                    stderr=b"loading\n<unknown>:0: error: 'spirv.Tosa.Cast' op failed to verify\nFailed to compile network\n")
            except subprocess.CalledProcessError as exc:
                raise RuntimeError("Vgf compiler failed.") from exc
        except RuntimeError as outer:
            return outer
        raise AssertionError("unreachable")

    a, b = error_info(compile_with("tmpab12")), error_info(compile_with("tmpzz98"))
    assert a.message.startswith(
        "CalledProcessError: model-converter exited with status 255: <unknown>:0: error: 'spirv.Tosa.Cast' op failed")
    assert "tmpab12" not in a.message and a.message.splitlines()[0].endswith(
        "; wrapped by RuntimeError: Vgf compiler failed.")
    assert a.signature == b.signature
    quiet = subprocess.CalledProcessError(1, "tool --flag")
    assert describe(quiet)[1].startswith("CalledProcessError: tool exited with status 1")


def test_a_runtime_error_code_is_explained_by_what_the_runtime_logged_before_it() -> None:
    """ExecuTorch returns an error code ("method->execute() failed with error 0x1") after logging why: the cause is
    the first runtime line that says an error, the innermost; the runtime's notes, the CPU probe's and Python's own
    output are not the runtime's error."""
    from harness.causes import runtime_said

    log = """[cpuinfo_utils.cpp:109] Failed to open midr file /sys/devices/system/cpu/cpu0/regs/identification/midr_el1
W1128 00:41:43.539000 6846 torch/_subclasses/fake_tensor.py:3212] an error in Python's words
[XNNExecutor.cpp:169] Internal Error: Propagating input shapes failed with code: xnn_status_invalid_parameter
[method.cpp:1528] CALL_DELEGATE execute failed at instruction 0: 0x1
"""
    assert runtime_said(log) == ("[XNNExecutor.cpp:169] Internal Error: Propagating input shapes failed with code: "
                                 "xnn_status_invalid_parameter")
    resize = ("[program.cpp:40] Loading method forward\n[tensor_impl.cpp:108] Attempted to change the tensor rank which is "
              "immutable: old=2, new=3\n[method.cpp:1243] Error resizing tensor at input 0\n")
    assert runtime_said(resize).startswith("[tensor_impl.cpp:108] Attempted to change the tensor rank")
    assert runtime_said("[program.cpp:40] Loading method forward\n") == ""  # no error: nothing to say
    assert runtime_said("RuntimeError: failed [x.cpp:1] no\n") == ""  # not a runtime line
    # the default log's format says the level: E and F are errors whatever the words, I and W are not
    assert runtime_said("I 00:00:01.000001 executorch:program.cpp:40] Missing nothing\n"
                        "F 00:57:19.400820 executorch:op_quantize.cpp:427] In function quantize_per_channel_out()\n") == \
        "F 00:57:19.400820 executorch:op_quantize.cpp:427] In function quantize_per_channel_out()"
    assert runtime_said("[method.cpp:90] Missing operator: [3] aten::foo.out\n").startswith("[method.cpp:90] Missing operator")


def test_only_an_exception_that_says_an_error_code_takes_the_runtimes_words(tmp_path: Path) -> None:
    """A stage's failure reads what the runtime logged on stderr (a worker's log, a regular file) while that stage ran:
    an error code ("failed with error 0x1") is explained by it, and keyed by it; an exception that says its own cause
    keeps it, and what was logged before the stage is not the stage's."""
    import os

    from harness.causes import says_only_a_code
    from harness.stages import StageLog, _Stop
    from harness.status import Stage

    assert says_only_a_code("method->execute() failed with error 0x1") and says_only_a_code("Failed to load method forward, error: 0x:1")
    assert not says_only_a_code("fake mode (<FakeTensorMode object at 0x7faa111bb1d0>) doesn't match")
    log = tmp_path / "worker.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = os.dup(2)
    try:
        os.dup2(fd, 2)
        os.write(2, b"[method.cpp:1] an earlier item's error: failed\n")

        def runtime(exc: Exception) -> None:
            os.write(2, b"[program.cpp:40] Loading method forward\n[XNNExecutor.cpp:169] Internal Error: Propagating input "
                        b"shapes failed with code: xnn_status_invalid_parameter\n")
            raise exc

        outcomes = []
        for exc in (RuntimeError("method->execute() failed with error 0x1"), ValueError("a lowering's own words")):
            log_ = StageLog()
            with pytest.raises(_Stop):
                log_(Stage.RUN, lambda e=exc: runtime(e))
            outcomes.append(log_.done[-1].error)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)
    coded, own = outcomes
    assert coded.message.splitlines()[0].endswith("; the runtime logged: [XNNExecutor.cpp:169] Internal Error: Propagating "
                                                  "input shapes failed with code: xnn_status_invalid_parameter"), coded.message
    assert "earlier item" not in coded.message and coded.signature.startswith("RuntimeError: [XNNExecutor.cpp:N] Internal Error")
    assert "runtime logged" not in own.message and own.signature.startswith("ValueError: a lowering's own words")


def test_a_cpp_exception_nested_as_text_is_named_by_its_innermost_level() -> None:
    """OpenVINO nests its C++ exceptions as text, a line per level: the detail and the signature name the innermost
    message (and where it was thrown), so two compile failures of different causes are two triage groups."""

    def compile_model(inner: str) -> BaseException:
        try:
            raise RuntimeError("Exception from src/inference/src/cpp/core.cpp:114:\n"
                               "Exception from src/inference/src/dev/plugin.cpp:53:\n" + inner + "\n\n")
        except RuntimeError as exc:
            return exc

    brgemm = error_info(compile_model("Exception from src/common/snippets/src/op/brgemm.cpp:135:\n"
                                      "BrgemmCPU node has incompatible input element types: f32 and bf16"))
    first = brgemm.message.splitlines()[0]
    assert first.startswith("RuntimeError: BrgemmCPU node has incompatible input element types: f32 and bf16 "
                            "(thrown at src/common/snippets/src/op/brgemm.cpp:135) (raised at ")
    assert "Exception from src/inference/src/cpp/core.cpp:114:" in brgemm.message  # the outer levels stay
    check = error_info(compile_model("Check 'is_conversion_successful' failed at src/frontends/pytorch/src/frontend.cpp:140:\n"
                                     "FrontEnd API failed with OpConversionFailure"))
    assert check.message.splitlines()[0].startswith(  # a failed check's explanation, on the line after it, joins it
        "RuntimeError: Check 'is_conversion_successful' failed at src/frontends/pytorch/src/frontend.cpp:140: "
        "FrontEnd API failed with OpConversionFailure (raised at ")
    repack = error_info(compile_model("Check 'repacking_expr' failed at src/plugins/intel_cpu/src/transformations/snippets/x64/"
                                      "pass/lowered/adjust_brgemm_copy_b_loop_ports.cpp:117:\nBrgemmCopyB expression is not found"))
    assert repack.message.splitlines()[0].startswith("RuntimeError: Check 'repacking_expr' failed at src/plugins/intel_cpu/"
                                                     "src/transformations/snippets/x64/pass/lowered/"
                                                     "adjust_brgemm_copy_b_loop_ports.cpp:117: BrgemmCopyB expression is not found")
    assert "BrgemmCopyB expression is not found" in repack.signature and repack.signature != check.signature
    outer = error_info(compile_model("Check 'ok' failed at src/a.cpp:1:\nException from src/b.cpp:2:\nthe inner reason"))
    assert outer.message.splitlines()[0].startswith("RuntimeError: the inner reason (thrown at src/b.cpp:2)"), outer.message
    bare = error_info(compile_model("Check 'ok' failed at src/a.cpp:1:"))  # no explanation: the check alone
    assert bare.message.splitlines()[0].startswith("RuntimeError: Check 'ok' failed at src/a.cpp:1: (raised at ")
    assert brgemm.signature != check.signature and "core.cpp" not in brgemm.signature + check.signature
    assert error_info(compile_model("plain")).signature == error_info(compile_model("plain")).signature
    only = error_info(compile_model("Exception from src/plugins/intel_cpu/src/graph.cpp:53"))  # no message of its own
    assert only.message.splitlines()[0].startswith("RuntimeError: Exception from src/plugins/intel_cpu/src/graph.cpp:53 (raised at ")
    assert "graph.cpp" in only.signature and "core.cpp" not in only.signature
