#!/usr/bin/env bash
# Everything the GPU machine is needed for, in one call, logs under $OUT:
#   bash perf/gpu_run.sh [tests] [sanitize] [simt] [ncu_simt] [plans] [overhead] [tune_time] [transformer] [accuracy] [clamp] [quick] [report ARGS...]
# tests: the GPU pytest suite (TESTS="paths" for a part of it, TESTS_K="a -k expression": TESTS
# is split on spaces); sanitize: compute-sanitizer memcheck over the CUDA ladder;
# simt: the warp-tiled SIMT kernel sweep (perf/tune_simt.py); ncu_simt: Nsight Compute of ladder
# step 9 and triton_gemm ieee beside cuBLAS SGEMM at 4096^3 (perf/profile_simt.py, executed
# instructions per opcode included), and the CUDA ladder's SASS;
# plans: perf/plans.py for each PLANS="M,N,K,LAYOUT:PRECISIONS ..." entry (every dispatch path
# of the shape beside cuBLAS);
# overhead: host cost per eager call (perf/overhead.py); clamp: perf/clamp_probe.py (fp16 and
# bf16) and perf/rows_probe.py on the shapes still to be measured; accuracy: fp32 precisions on N(0,1) and U(0,1) data (perf/accuracy.py); tune_time: first-call tuning time and its reuse by a second process (perf/tune_time.py); transformer: perf/transformer.py; quick: perf/report.py --quick; report ARGS: perf/report.py with ARGS (must come last).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
status=0
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} > "$out/device.txt" 2>&1
cat "$out/device.txt"
while [ $# -gt 0 ]; do
    case "$1" in
        tests)
            # In parallel where pytest-xdist is installed (the device image has it): the suite
            # is ~1430 tests, most of them compiling a config (ptxas is CPU-bound), and ran
            # serially 352 tests in 400 s on the H100 machine, so all of it overran one call.
            # One seed for every worker, printed, so a failure can be replayed.
            parallel=""
            python3 -c "import xdist" 2>/dev/null && parallel="-n ${WORKERS:-12}"
            export TRITON_GEMM_TEST_SEED="${TRITON_GEMM_TEST_SEED:-$(python3 -c \
                'import random; print(random.randrange(2**31))')}"
            echo "TRITON_GEMM_TEST_SEED=$TRITON_GEMM_TEST_SEED ${parallel:-serial}" \
                | tee -a "$out/pytest.log"
            # shellcheck disable=SC2086
            python3 -m pytest -q -rs --durations=15 $parallel ${TESTS:-tests} \
                ${TESTS_K:+-k "$TESTS_K"} 2>&1 \
                | tee -a "$out/pytest.log" | tail -40
            status=$((status | ${PIPESTATUS[0]})) ;;
        sanitize)
            compute-sanitizer --tool memcheck --leak-check no python3 perf/sanitize_ladder.py \
                > "$out/sanitizer.log" 2>&1
            status=$((status | $?)); tail -8 "$out/sanitizer.log" ;;
        simt)
            python3 perf/tune_simt.py > "$out/tune_simt.log" 2>&1
            status=$((status | $?)); cat "$out/tune_simt.log" ;;
        ncu_simt)
            ncu --profile-from-start off --section SpeedOfLight --section Occupancy \
                --section LaunchStats --section WarpStateStats --section SchedulerStats \
                --section InstructionStats --section ComputeWorkloadAnalysis \
                --section MemoryWorkloadAnalysis_Tables --print-details all \
                python3 perf/profile_simt.py > "$out/ncu_simt.log" 2>&1
            status=$((status | $?)); grep -vE "^==PROF==" "$out/ncu_simt.log" | head -400
            so=$(grep -oE "extension: .*" "$out/ncu_simt.log" | cut -d' ' -f2)
            [ -n "$so" ] && cuobjdump -sass "$so" > "$out/cuda_ref.sass" 2>&1 ;;
        plans)
            for spec in ${PLANS:?plans needs PLANS=\"M,N,K,LAYOUT:PRECISIONS ...\"}; do
                python3 perf/plans.py --case "${spec%%:*}" --precision "${spec#*:}" 2>&1 \
                    | tee -a "$out/plans.log" | tail -40
                status=$((status | ${PIPESTATUS[0]}))
            done ;;
        tune_time)
            python3 perf/tune_time.py --out "$out/tune_time" 2>&1 | tee "$out/tune_time.log" | tail -12
            status=$((status | ${PIPESTATUS[0]})) ;;
        overhead)
            { python3 perf/overhead.py --shape 256,256,256 --profile
              python3 perf/overhead.py --shape 1000,1000,1000 --profile
              python3 perf/overhead.py --shape 2048,2048,2048
              python3 perf/overhead.py --shape 16,8192,8192 --nt
              python3 perf/overhead.py --shape 128,128,65536; } > "$out/overhead.log" 2>&1
            status=$((status | $?)); cat "$out/overhead.log" | head -120 ;;
        transformer)
            python3 perf/transformer.py > "$out/transformer.log" 2>&1
            status=$((status | $?)); cat "$out/transformer.log" ;;
        clamp)
            # Whether planes of rows gain from persistent.CLAMP_PLANES (off until this says),
            # then the rows against an 11008-wide weight (perf/rows_probe.py); each probe
            # capped so one that hangs leaves the others their time.
            rc=0
            { timeout 240 python3 perf/clamp_probe.py \
                  --shapes 1000,1000,1000 2000,1000,1000 1000,4096,1000 || rc=1
              timeout 120 python3 perf/clamp_probe.py --dtype bf16 --shapes 1000,1000,1000 \
                  || rc=1
              timeout 180 python3 perf/rows_probe.py --weight 11008,4096 \
                  --rows 80,112,144,160 || rc=1; } > "$out/clamp.log" 2>&1
            status=$((status | rc)); cat "$out/clamp.log" ;;
        accuracy)
            python3 perf/accuracy.py > "$out/accuracy.log" 2>&1
            status=$((status | $?)); cat "$out/accuracy.log" ;;
        quick)
            python3 perf/report.py --quick --out "$out/report" 2>&1 \
                | tee "$out/report.log" | tail -60
            status=$((status | ${PIPESTATUS[0]})) ;;
        report)
            shift
            python3 perf/report.py --out "$out/report" "$@" 2>&1 \
                | tee "$out/report.log" | tail -80
            status=$((status | ${PIPESTATUS[0]}))
            break ;;
        *) echo "unknown stage $1"; exit 2 ;;
    esac
    shift
done
exit "$status"
