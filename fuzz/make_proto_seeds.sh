#!/usr/bin/env bash
# Writes the binary seeds of agent_messages and launch_order from the text
# protos below (protoc --encode; each AgentMessage with its varint length
# first, as agent_entry.cc reads a stream). Run from the repository root
# after changing them: fuzz/make_proto_seeds.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=fuzz/corpus
encode() { protoc -I . --encode="trainyard.v1.$1" proto/service.proto; }
# A stream: each argument one AgentMessage in text form.
stream() {
  local file=$1; shift
  : >"$file"
  for m in "$@"; do
    printf '%s' "$m" | encode AgentMessage >/tmp/ty-seed-msg.$$
    python3 -c 'import sys
n=len(open(sys.argv[1],"rb").read()); b=bytearray()
while True:
    c=n&0x7f; n>>=7
    b.append(c|(0x80 if n else 0))
    if not n: break
sys.stdout.buffer.write(bytes(b)+open(sys.argv[1],"rb").read())' /tmp/ty-seed-msg.$$ >>"$file"
  done
  rm -f /tmp/ty-seed-msg.$$
}
T='job: "train" role: "worker" job_id: 1'
stream $out/agent_messages/seed-run-and-succeed \
  "heartbeat { tasks { $T index: 0 attempt: 0 state: TASK_RUNNING } ports_in_use { begin: 30000 end: 30001 } data_free_mb: 1000 }" \
  "status { $T index: 0 attempt: 0 launch_attempt: 0 state: TASK_RUNNING pid: 42 }" \
  "log { request_id: 1 attempt: 0 data: \"1800000001000000000 step 1\\n\" offset: 0 }" \
  "status { $T index: 0 attempt: 0 state: TASK_SUCCEEDED exit { exit_code: 0 } }"
stream $out/agent_messages/seed-fail-and-reregister \
  "status { $T index: 0 attempt: 0 state: TASK_FAILED exit { exit_code: 137 } node_fault: true }" \
  "register { name: \"n1\" address: \"10.0.0.1\" capacity { memory_mb: 65536 vcores_milli: 32000 gpus: 8 ports { begin: 30000 end: 30999 } } topology { gpu_count: 8 } }" \
  "heartbeat { busy_gpu_mask: 3 }"
stream $out/agent_messages/seed-drain-and-strangers \
  "status { job: \"other\" role: \"ps\" index: 5 attempt: 9 state: TASK_RUNNING }" \
  "register { name: \"n2\" }" \
  "log { request_id: 99 error: \"gone\" }" \
  "draining { reason: \"maintenance\" }"
encode TaskSpec >$out/launch_order/seed-worker <<'P'
job: "train" role: "worker" index: 1 worker_id: 1 node: "n1" attempt: 0 job_id: 7
allocation { memory_mb: 1024 vcores_milli: 500 gpus: 1 gpu_mask: 2 ports { begin: 30000 end: 30001 } }
command: "python" command: "train.py"
env { key: "TRAINYARD_JOB" value: "train" }
env { key: "HOSTS" value: "${TRAINYARD_TASK_DIR}/hosts" }
files { key: "hosts" value: "n1 10.0.0.1\n" }
restart_policy: RESTART_ON_FAILURE max_restarts: 3 kill_grace_ms: 1000
P
encode TaskSpec >$out/launch_order/finding-escaping-names <<'P'
job: "../../escape" role: "worker" index: 0 command: "true"
files { key: "x" value: "y" }
P
encode TaskSpec >$out/launch_order/seed-bad-file-name <<'P'
job: "train" role: "ps" index: 0 command: "true"
files { key: "../hosts" value: "y" }
env { key: "A=B" value: "c" }
P
