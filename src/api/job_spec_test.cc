#include "api/job_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/malformed_specs_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainyard::api {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The message of the spec's refusal; "" when it was accepted.
std::string JobSpecRefusal(const std::string& yaml, const core::AllocationLimits& limits = {}) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpec(yaml, limits);
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

constexpr char kRole[] = "name: j\nreplicas:\n  worker:\n    command: [x]\n";

constexpr char kGoodSpec[] = R"(
name: mnist
user: alice
queue: research
priority: production
framework: tensorflow
relaxLocality: true
nodeSelector: {gpu_model: V100M32}
replicas:
  ps:
    count: 2
    resources: {cpu: 500m, memory: 1Gi, ports: 1}
    command: [sh, -c, "sleep 100"]
  worker:
    count: 4
    restartPolicy: OnFailure
    maxRestarts: 3
    resources: {cpu: 2, memory: 4096, gpus: 2}
    command: ["./train"]
    args: ["--epochs", "3"]
    env: {LR: "0.1"}
)";

TEST(JobSpecTest, ParsesEveryField) {
  auto spec = LoadJobSpec(kGoodSpec, core::AllocationLimits{});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "mnist");
  EXPECT_EQ(spec->user(), "alice");
  EXPECT_EQ(spec->queue(), "research");
  EXPECT_EQ(spec->priority(), v1::PRIORITY_PRODUCTION);
  EXPECT_EQ(spec->framework(), v1::FRAMEWORK_TENSORFLOW);
  EXPECT_TRUE(spec->relax_locality());
  EXPECT_EQ(spec->node_selector().at("gpu_model"), "V100M32");
  ASSERT_EQ(spec->replicas_size(), 2);
  const auto& ps = spec->replicas(0);
  EXPECT_EQ(ps.role(), "ps");
  EXPECT_EQ(ps.count(), 2);
  EXPECT_EQ(ps.resources().vcores_milli(), 500);
  EXPECT_EQ(ps.resources().memory_mb(), 1024);
  EXPECT_EQ(ps.resources().port_count(), 1);
  const auto& worker = spec->replicas(1);
  EXPECT_EQ(worker.restart_policy(), v1::RESTART_ON_FAILURE);
  EXPECT_EQ(worker.max_restarts(), 3);
  EXPECT_EQ(worker.resources().gpus(), 2);
  EXPECT_EQ(worker.resources().vcores_milli(), 2000);
  EXPECT_EQ(worker.args_size(), 2);
  EXPECT_EQ(worker.env().at("LR"), "0.1");
}

TEST(JobSpecTest, QuantitiesAcceptKubernetesForms) {
  EXPECT_EQ(*ParseCpuQuantity("1.5"), 1500);
  EXPECT_EQ(*ParseCpuQuantity("250m"), 250);
  EXPECT_EQ(*ParseMemoryQuantity("512Mi"), 512);
  EXPECT_EQ(*ParseMemoryQuantity("4Gi"), 4096);
  EXPECT_EQ(*ParseMemoryQuantity("2048"), 2048);
  EXPECT_EQ(*ParseMemoryQuantity("1G"), 954);  // 10^9 bytes, rounded up to MiB
  EXPECT_THAT(ParseCpuQuantity("lots").status().message(), HasSubstr("'lots' is not a CPU quantity"));
  EXPECT_THAT(ParseMemoryQuantity("4Gb").status().message(), HasSubstr("'4Gb' is not a memory quantity"));
  // Found by fuzz/ (job_spec): ~10^20 MiB used to be cast to int64 (undefined
  // behaviour; in practice a negative size).
  EXPECT_EQ(ParseMemoryQuantity("99999999999999Ti").status().message(),
            "'99999999999999Ti' is more memory than can be counted");
}

TEST(JobSpecTest, ReportsEveryProblemWithItsFieldPath) {
  auto spec = LoadJobSpec(R"(
name: Bad_Name
colour: blue
priority: urgent
replicas:
  worker:
    count: 0
    resources: {gpus: 9, cpu: fast, disk: 10}
    command: [x]
    restartPolicy: Sometimes
)", core::AllocationLimits{});
  ASSERT_FALSE(spec.ok());
  std::string m(spec.status().message());
  EXPECT_THAT(m, HasSubstr("colour: unknown field"));
  EXPECT_THAT(m, HasSubstr("priority: 'urgent' is not one of production, iteration, ptr"));
  EXPECT_THAT(m, HasSubstr("replicas.worker.resources.disk: unknown field"));
  EXPECT_THAT(m, HasSubstr("replicas.worker.resources.cpu: 'fast' is not a CPU quantity"));
  EXPECT_THAT(m, HasSubstr("replicas.worker.restartPolicy: 'Sometimes' is not one of Never, OnFailure, Always"));
}

TEST(JobSpecTest, AServiceRoleIsReadWithItsKindAndNeedsANameOfItsOwn) {
  auto spec = LoadJobSpec(R"(
name: train
replicas:
  worker: {command: [python3, train.py]}
  board: {kind: service, command: [tensorboard]}
)", core::AllocationLimits{});
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->replicas_size(), 2);
  for (const v1::ReplicaSpec& rs : spec->replicas()) {
    EXPECT_EQ(rs.kind(), rs.role() == "board" ? v1::ROLE_KIND_SERVICE : v1::ROLE_KIND_TASK) << rs.role();
  }

  auto bad = LoadJobSpec(R"(
name: train
replicas:
  worker: {kind: service, command: [x]}
  board: {kind: daemon, command: [x]}
  web: {kind: [service], command: [x]}
)", core::AllocationLimits{});
  ASSERT_FALSE(bad.ok());
  std::string m(bad.status().message());
  EXPECT_THAT(m, HasSubstr("replicas.worker.kind: a service needs a role name of its own ('worker' is a framework's"));
  EXPECT_THAT(m, HasSubstr("replicas.board.kind: 'daemon' is not one of task, service"));
  EXPECT_THAT(m, HasSubstr("replicas.web.kind:"));
}

TEST(JobSpecTest, AnImageAndItsVolumesAreReadAndTheImageMayGiveTheCommand) {
  auto spec = LoadJobSpec(R"(
name: train
replicas:
  worker:
    image: oci:/srv/images/torch:2.1
    volumes:
      - {hostPath: /datasets/imagenet, path: /data, readOnly: true}
      - {hostPath: /scratch}
)", core::AllocationLimits{});
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::ReplicaSpec& rs = spec->replicas(0);
  EXPECT_EQ(rs.image(), "oci:/srv/images/torch:2.1");
  EXPECT_TRUE(rs.command().empty()) << "the image's entrypoint and cmd run";
  ASSERT_EQ(rs.volumes_size(), 2);
  EXPECT_EQ(rs.volumes(0).host_path(), "/datasets/imagenet");
  EXPECT_EQ(rs.volumes(0).path(), "/data");
  EXPECT_TRUE(rs.volumes(0).read_only());
  EXPECT_EQ(rs.volumes(1).path(), "/scratch") << "the host's path when none is given";
  EXPECT_FALSE(rs.volumes(1).read_only());

  auto bad = LoadJobSpec(R"(
name: train
replicas:
  worker: {image: "ubuntu:22.04", command: [x]}
  ps: {volumes: [{hostPath: /data}], command: [x]}
  chief: {image: "oci:/i", volumes: [{hostPath: data, path: /proc/x}, {hostPath: /a, path: /d}, {hostPath: /b, path: /d}, {size: 1}]}
  evaluator: {}
)", core::AllocationLimits{});
  ASSERT_FALSE(bad.ok());
  std::string m(bad.status().message());
  EXPECT_THAT(m, HasSubstr("replicas.worker.image: 'ubuntu:22.04' is not oci:PATH[:TAG], oci-archive:PATH[:TAG] or "
                           "docker://[HOST/]NAME[:TAG]"));
  EXPECT_THAT(m, HasSubstr("replicas.ps.volumes: needs an image"));
  EXPECT_THAT(m, HasSubstr("replicas.chief.volumes[0].hostPath: must be an absolute path"));
  EXPECT_THAT(m, HasSubstr("replicas.chief.volumes[2].path: /d is mounted twice"));
  EXPECT_THAT(m, HasSubstr("replicas.chief.volumes[3].size: unknown field"));
  EXPECT_THAT(m, HasSubstr("replicas.evaluator.command: required (or an image whose entrypoint runs)"));
}

TEST(JobSpecTest, ValidationNamesResourceValueAndLimit) {
  auto spec = LoadJobSpec(R"(
name: big
replicas:
  worker:
    count: 0
    resources: {gpus: 9}
    command: [x]
)", core::AllocationLimits{});
  ASSERT_FALSE(spec.ok());
  std::string m(spec.status().message());
  EXPECT_THAT(m, HasSubstr("replicas.worker.count: 0 must be between 1 and 10000"));
  EXPECT_THAT(m, HasSubstr("replicas.worker.resources.gpus: 9 is above the maximum allocation 8"));
}

TEST(JobSpecTest, MaskAndCountMustAgree) {
  auto spec = LoadJobSpec(R"(
name: masked
replicas:
  worker:
    resources: {gpus: 3, gpuMask: [0, 1]}
    command: [x]
)", core::AllocationLimits{});
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("replicas.worker.resources.gpu"));
  auto ok = LoadJobSpec(R"(
name: masked
replicas:
  worker:
    resources: {gpuMask: "0-1"}
    command: [x]
)", core::AllocationLimits{});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->replicas(0).resources().gpus(), 2);
  EXPECT_EQ(ok->replicas(0).resources().gpu_mask(), 0x3u);
}

TEST(JobSpecTest, FrameworkNeedsItsRoles) {
  auto tf = LoadJobSpec("name: t\nframework: tensorflow\nreplicas:\n  ps: {command: [x]}\n",
                        core::AllocationLimits{});
  ASSERT_FALSE(tf.ok());
  EXPECT_THAT(tf.status().message(), HasSubstr("tensorflow needs a 'worker' or 'chief' role"));
  auto pt = LoadJobSpec("name: p\nframework: pytorch\nreplicas:\n  master: {count: 2, command: [x]}\n",
                        core::AllocationLimits{});
  ASSERT_FALSE(pt.ok());
  EXPECT_THAT(pt.status().message(), HasSubstr("pytorch needs exactly one master rank, got 2"));
}

TEST(JobSpecTest, MalformedYamlNamesTheLine) {
  auto spec = LoadJobSpec("name: x\nreplicas: [\n", core::AllocationLimits{});
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("not valid YAML: line"));
}

TEST(JobSpecTest, CommandAsAStringIsRefusedAsKubernetesDoes) {
  EXPECT_EQ(JobSpecRefusal("name: j\nreplicas:\n  worker:\n    command: \"echo hi there\"\n"),
            "replicas.worker.command: must be a list of strings, e.g. [\"sh\", \"-c\", \"echo hi there\"], "
            "not a string");
  EXPECT_EQ(JobSpecRefusal(std::string(kRole) + "    args: --epochs 3\n"),
            "replicas.worker.args: must be a list of strings, e.g. [\"sh\", \"-c\", \"--epochs 3\"], not a string");
  EXPECT_EQ(JobSpecRefusal("name: j\nreplicas:\n  worker:\n    command: {a: b}\n"),
            "replicas.worker.command: must be a list of strings, e.g. [\"echo\", \"hi\"]");
}

TEST(JobSpecTest, ResourceProblemsNameTheFieldsAsWrittenInTheirUnits) {
  std::string m = JobSpecRefusal(std::string(kRole) + "    resources: {cpu: -1, memory: -5Gi, gpus: -1, ports: -2}\n");
  EXPECT_EQ(m,
            "replicas.worker.resources.cpu: -1 is negative\n"
            "replicas.worker.resources.memory: -5Gi is negative\n"
            "replicas.worker.resources.gpus: -1 is negative\n"
            "replicas.worker.resources.ports: -2 is negative");
  core::AllocationLimits limits;
  limits.min_memory_mb = 512;
  EXPECT_EQ(JobSpecRefusal(std::string(kRole) + "    resources: {cpu: 300, memory: 100Mi, gpus: 3, gpuMask: [0, 1]}\n",
                    limits),
            "replicas.worker.resources.cpu: 300 is above the maximum allocation 256\n"
            "replicas.worker.resources.memory: 100Mi is below the minimum allocation 512Mi\n"
            "replicas.worker.resources.gpus: 3 does not match gpuMask 0-1 (2 GPUs)");
  EXPECT_EQ(JobSpecRefusal(std::string(kRole) + "    resources: {cpu: 1500m, memory: 2Ti, ports: 65}\n"),
            "replicas.worker.resources.memory: 2Ti is above the maximum allocation 1Ti\n"
            "replicas.worker.resources.ports: 65 is above the maximum allocation 64");
}

TEST(JobSpecTest, AMissingNameIsRequiredNotTooShort) {
  EXPECT_EQ(JobSpecRefusal("replicas:\n  worker: {command: [x]}\n"), "name: required (1-63 characters of a-z, 0-9 and '-')");
}

TEST(JobSpecTest, ParseAndValidationProblemsComeAllAtOnce) {
  // Before, parsing stopped the check: only the cpu and the colour showed,
  // then the name and the count on the next try.
  std::string m = JobSpecRefusal(R"(
colour: blue
replicas:
  worker:
    count: 0
    command: "echo hi"
    resources: {cpu: fast, memory: -1}
)");
  EXPECT_EQ(m,
            "colour: unknown field (known: activeDeadline, array, dependencies, framework, hold, jobmaster, name, nodeName, "
            "nodeSelector, "
            "priority, queue, rack, relaxLocality, replicas, successPolicy, user)\n"
            "replicas.worker.resources.cpu: 'fast' is not a CPU quantity like 2, 1.5 or 500m\n"
            "replicas.worker.command: must be a list of strings, e.g. [\"sh\", \"-c\", \"echo hi\"], not a string\n"
            "name: required (1-63 characters of a-z, 0-9 and '-')\n"
            "replicas.worker.count: 0 must be between 1 and 10000\n"
            "replicas.worker.resources.memory: -1Mi is negative");
}

TEST(JobSpecTest, KeysThatAreNotStringsAreProblemsNotExceptions) {
  EXPECT_EQ(JobSpecRefusal(std::string(kRole) + "    env: {[k]: v}\n"),
            "replicas.worker.env: line 5: a key must be a string, not a list or mapping");
  EXPECT_EQ(JobSpecRefusal("name: j\nreplicas:\n  {w: 1}: {command: [x]}\n"),
            "replicas: line 3: a key must be a string, not a list or mapping");
  EXPECT_EQ(JobSpecRefusal(std::string("? [a]\n: b\n") + kRole),
            "spec: line 1: a key must be a string, not a list or mapping");
}

TEST(JobSpecTest, NulBytesInWhatIsExecutedAreRefused) {
  EXPECT_EQ(JobSpecRefusal("name: j\nreplicas:\n  worker:\n    command: [\"a\\0b\"]\n    args: [ok, \"\\0\"]\n"
                    "    env: {A: \"x\\0y\", \"B\\0C\": z}\n    workingDir: \"/tmp\\0\"\n"),
            "replicas.worker.command[0]: contains a NUL byte\n"
            "replicas.worker.args[1]: contains a NUL byte\n"
            "replicas.worker.env.A: the value contains a NUL byte\n"
            "replicas.worker.env.\"B\\000C\": the name contains a NUL byte\n"
            "replicas.worker.workingDir: contains a NUL byte");
}

TEST(JobSpecTest, EnvNamesThatWouldSetAnotherVariableAreRefused) {
  EXPECT_EQ(JobSpecRefusal(std::string(kRole) + "    env: {\"PATH=/evil:\": x, \"\": y, OK: z}\n"),
            "replicas.worker.env: a variable name must not be empty\n"
            "replicas.worker.env.PATH=/evil:: a variable name must not contain '='");
}

TEST(JobSpecTest, DuplicateKeysAreRefusedNotFirstWins) {
  EXPECT_EQ(JobSpecRefusal("name: j\nreplicas:\n  worker:\n    command: [x]\n    env:\n      A: 1\n      A: 2\n"),
            "replicas.worker.env.A: duplicate key (first on line 6)");
  EXPECT_EQ(JobSpecRefusal("name: j\nname: k\nreplicas:\n  worker: {command: [x]}\n  worker: {command: [y]}\n"),
            "name: duplicate key (first on line 1)\n"
            "replicas.worker: duplicate key (first on line 4)");
}

TEST(JobSpecTest, MoreThanOneDocumentIsRefused) {
  EXPECT_EQ(JobSpecRefusal(std::string(kRole) + "---\n" + kRole),
            "spec: holds more than one YAML document (---); a job spec is one");
  // Found by fuzz/ (job_spec) when specs were read with yaml-cpp: its
  // LoadAll never returned on these. Refused, and at once.
  EXPECT_THAT(JobSpecRefusal("name: x\n---\n, a\n"), HasSubstr("spec: holds more than one YAML document"));
  for (const char* text : {",", "# c\n,"}) {
    EXPECT_THAT(JobSpecRefusal(text), HasSubstr("spec: not valid YAML: line ")) << text;
  }
  // A first "---" starts the one document; any later marker is a second.
  EXPECT_EQ(JobSpecRefusal(std::string("# a job\n---\n") + kRole + "..."), "");
  EXPECT_THAT(JobSpecRefusal(std::string(kRole) + "...\n---\n" + kRole), HasSubstr("more than one YAML document"));
  EXPECT_THAT(JobSpecRefusal(std::string("---\n") + kRole + "--- \n" + kRole), HasSubstr("more than one YAML document"));
}

// Anchors and aliases read as YAML says (an alias is the node it names);
// an alias before its anchor, or nesting past the bound, is refused with
// the line; null forms are null.
TEST(JobSpecTest, AliasesNullsAndNestingAreReadAsYamlSays) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpec(
      "name: j\nreplicas:\n  ps: {command: &cmd [sleep, '1'], env: &env {A: '1'}}\n"
      "  worker: {command: *cmd, env: *env}\n",
      core::AllocationLimits{});
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->replicas_size(), 2);
  EXPECT_EQ(spec->replicas(1).command_size(), 2);
  EXPECT_EQ(spec->replicas(1).env().at("A"), "1");
  EXPECT_EQ(JobSpecRefusal("name: j\nreplicas:\n  worker: {command: *cmd}\n"),
            "spec: not valid YAML: line 3, column 21: alias *cmd names no anchor before it");
  EXPECT_EQ(JobSpecRefusal("name: ~\nreplicas:\n  worker: {command: [x]}\n"), "name: must be a string");
  EXPECT_EQ(JobSpecRefusal("name: 'null'\nreplicas:\n  worker: {command: [x]}\n"), "");
  std::string deep = "name: j\nreplicas:\n  worker: {command: " + std::string(100, '[') + std::string(100, ']') + "}\n";
  EXPECT_THAT(JobSpecRefusal(deep), HasSubstr("line 3, column "));
  EXPECT_THAT(JobSpecRefusal(deep), HasSubstr("nested more than 64 deep"));
  // Aliases of a large scalar: a 215 KB text that would hold 1 GB expanded
  // (the reader copies each into the job) is refused as it is read.
  std::string bomb = "name: j\nreplicas:\n  worker:\n    command: [x]\n    args: [&a " + std::string(200000, 'x');
  for (int i = 0; i < 5000; ++i) bomb += ", *a";
  bomb += "]\n";
  EXPECT_THAT(JobSpecRefusal(bomb), HasSubstr("with its aliases expanded the document holds more than"));
  // A few aliases of a small anchor are fine.
  EXPECT_EQ(JobSpecRefusal("name: j\nreplicas:\n  worker: {command: [&c x], args: [*c, *c, *c]}\n"), "");
}

TEST(JobSpecTest, UserCredentialIsARolesChoiceAndABool) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpec(
      "name: j\nreplicas:\n  chief: {command: [x], userCredential: true}\n  worker: {command: [x]}\n",
      core::AllocationLimits{});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->replicas(0).user_credential());
  EXPECT_FALSE(spec->replicas(1).user_credential());
  EXPECT_EQ(JobSpecRefusal("name: j\nreplicas:\n  worker: {command: [x], userCredential: admin}\n"),
            "replicas.worker.userCredential: must be true or false");
}

TEST(JobSpecTest, ProblemsBeyondAHundredAreCounted) {
  std::string spec = "name: j\nreplicas:\n  worker:\n    command: [" + testing::Repeat("[x], ", 149) + "[x]]\n";
  std::vector<std::string> lines = absl::StrSplit(JobSpecRefusal(spec), '\n');
  ASSERT_EQ(lines.size(), 101u);
  EXPECT_EQ(lines[0], "replicas.worker.command[0]: must be a string");
  EXPECT_EQ(lines[100], "... and 50 more problems");
}

TEST(JobSpecTest, MalformedYamlIsAlwaysACleanError) {
  for (const auto& [name, text] : testing::MalformedSpecs()) {
    v1::JobSpec spec;
    ASSERT_NO_THROW(ParseJobSpecYamlInto(text, &spec)) << name;
    std::string refusal;
    ASSERT_NO_THROW(refusal = JobSpecRefusal(text)) << name;
    ASSERT_FALSE(refusal.empty()) << name;
    for (absl::string_view line : absl::StrSplit(refusal, '\n')) EXPECT_THAT(line, HasSubstr(": ")) << name;
  }
}

TEST(JobSpecTest, QuantitiesPrintAsWritten) {
  EXPECT_EQ(CpuQuantityText(2000), "2");
  EXPECT_EQ(CpuQuantityText(1500), "1500m");
  EXPECT_EQ(MemoryQuantityText(4096), "4Gi");
  EXPECT_EQ(MemoryQuantityText(1536), "1536Mi");
  EXPECT_EQ(MemoryQuantityText(1 << 21), "2Ti");
}

}  // namespace
TEST(JobSpecTest, AnEnvValueMayBeSecretAndBadFormsAreNamed) {
  auto spec = LoadJobSpec(R"(
name: s
replicas:
  worker:
    command: [x]
    env: {PLAIN: "1", AWS_SECRET_ACCESS_KEY: {secret: "abc/123"}}
)", core::AllocationLimits{});
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::ReplicaSpec& rs = spec->replicas(0);
  EXPECT_EQ(rs.env().at("PLAIN"), "1");
  EXPECT_EQ(rs.env().count("AWS_SECRET_ACCESS_KEY"), 0u);
  EXPECT_EQ(rs.secret_env().at("AWS_SECRET_ACCESS_KEY"), "abc/123");

  auto bad = LoadJobSpec(R"(
name: s
replicas:
  worker:
    command: [x]
    env: {A: {secret: [1]}, B: {value: x}, "C=D": {secret: x}}
)", core::AllocationLimits{});
  ASSERT_FALSE(bad.ok());
  std::string m(bad.status().message());
  EXPECT_THAT(m, HasSubstr("replicas.worker.env.A: must be a string, or {secret: VALUE} for a secret value"));
  EXPECT_THAT(m, HasSubstr("replicas.worker.env.B: must be a string, or {secret: VALUE} for a secret value"));
  EXPECT_THAT(m, HasSubstr("replicas.worker.env.C=D: a variable name must not contain '='"));

  // A secret may not stand in for what Trainyard sets (who the task runs as).
  auto ours = LoadJobSpec("name: s\nreplicas:\n  worker:\n    command: [x]\n    env: {TRAINYARD_USER: {secret: root}}\n",
                          core::AllocationLimits{});
  ASSERT_FALSE(ours.ok());
  EXPECT_THAT(std::string(ours.status().message()),
              HasSubstr("replicas.worker.env.TRAINYARD_USER: TRAINYARD_ variables are set by Trainyard, not secret"));
}

// ---- what one submission may cost (SpecBounds) and what can run ----
namespace {

using ::testing::HasSubstr;

// A job of `roles` roles of `count` tasks each, every role with `env_bytes`
// of one variable's value.
v1::JobSpec ManyRoles(int roles, int count, size_t env_bytes = 0) {
  v1::JobSpec spec;
  spec.set_name("big");
  for (int r = 0; r < roles; ++r) {
    v1::ReplicaSpec* rs = spec.add_replicas();
    rs->set_role(absl::StrCat("r", r));
    rs->set_count(count);
    *rs->add_command() = std::string(1, 'x');  // not add_command("x"): GCC 12 warns falsely (-Wrestrict)
    if (env_bytes > 0) (*rs->mutable_env())["V"] = std::string(env_bytes, 'v');
  }
  return spec;
}

std::string Refused(const std::string& yaml) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpec(yaml, {});
  return spec.ok() ? "" : std::string(spec.status().message());
}

constexpr char kWorker[] = "name: j\nreplicas:\n  worker:\n    command: [x]\n";

TEST(SpecBoundsTest, TooManyRolesIsOneLineNamingTheLimitAndItsKey) {
  std::vector<std::string> over = CheckSpecBounds(ManyRoles(5000, 1), SpecBounds{});
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0], "replicas: 5000 roles is above the 100 roles this server takes in one job "
                     "(maxRolesPerJob in its config)");
  EXPECT_TRUE(CheckSpecBounds(ManyRoles(100, 1), SpecBounds{}).empty());
}

TEST(SpecBoundsTest, TasksAreCountedOverAllRoles) {
  // Each role is within the bound; the job is not.
  std::vector<std::string> over = CheckSpecBounds(ManyRoles(3, 700), SpecBounds{});
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0], "replicas: 2100 tasks in all (the sum of the roles' counts) is above the 2000 tasks this "
                     "server takes in one job (maxTasksPerJob in its config)");
  EXPECT_TRUE(CheckSpecBounds(ManyRoles(1, 2000), SpecBounds{}).empty());
  SpecBounds small;
  small.max_tasks = 500;
  EXPECT_THAT(CheckSpecBounds(ManyRoles(1, 501), small)[0], HasSubstr("above the 500 tasks"));
}

TEST(SpecBoundsTest, EnvAndCommandBytesPerRoleNameTheRoleAndTheKey) {
  v1::JobSpec spec = ManyRoles(1, 1, 200 << 10);
  spec.mutable_replicas(0)->add_args(std::string(130 << 10, 'a'));
  std::vector<std::string> over = CheckSpecBounds(spec, SpecBounds{});
  ASSERT_EQ(over.size(), 2u);
  EXPECT_EQ(over[0], absl::StrCat("replicas.r0.env: ", (200 << 10) + 1, " bytes is above the 131072 bytes this "
                                  "server takes per role (maxEnvBytesPerRole in its config)"));
  EXPECT_EQ(over[1], absl::StrCat("replicas.r0.command: ", (130 << 10) + 1, " bytes with args is above the 131072 "
                                  "bytes this server takes per role (maxCommandBytesPerRole in its config)"));
  // Secret values count as env.
  v1::JobSpec secret = ManyRoles(1, 1);
  (*secret.mutable_replicas(0)->mutable_secret_env())["S"] = std::string(140 << 10, 's');
  EXPECT_THAT(CheckSpecBounds(secret, SpecBounds{}), ::testing::ElementsAre(HasSubstr("replicas.r0.env: ")));
}

TEST(SpecBoundsTest, WhatTheLaunchesCarryIsBoundedOverTheJob) {
  // 2000 tasks with 40 KiB of env each: within each bound alone, but 80 MB
  // of launch orders.
  std::vector<std::string> over = CheckSpecBounds(ManyRoles(1, 2000, 40 << 10), SpecBounds{});
  ASSERT_EQ(over.size(), 1u);
  EXPECT_THAT(over[0], HasSubstr("replicas: "));
  EXPECT_THAT(over[0], HasSubstr(" tasks is above the 67108864 bytes this server takes in one job "
                                 "(maxLaunchBytesPerJob in its config)"));
  EXPECT_TRUE(CheckSpecBounds(ManyRoles(1, 2000, 32 << 10), SpecBounds{}).empty());
}

TEST(JobSpecTest, CpuBelowWhatTheKernelCanEnforceIsRefusedWithTheMinimum) {
  // 1m became a CFS quota of 100 us, which the kernel refuses: every task
  // failed to start (exit code 127).
  EXPECT_EQ(Refused(absl::StrCat(kWorker, "    resources: {cpu: 1m}\n")),
            "replicas.worker.resources.cpu: 1m is below 10m, the least CPU a task can run with (the kernel takes "
            "no CPU quota below 1 ms per 100 ms period)");
  EXPECT_THAT(Refused(absl::StrCat(kWorker, "    resources: {cpu: 0.009}\n")),
              ::testing::StartsWith("replicas.worker.resources.cpu: 9m is below 10m,"));
  EXPECT_EQ(Refused(absl::StrCat(kWorker, "    resources: {cpu: 10m}\n")), "");
  EXPECT_EQ(Refused(absl::StrCat(kWorker, "    resources: {memory: 1Mi}\n")),
            "replicas.worker.resources.memory: 1Mi is below 4Mi, the least memory a task can start in (a program "
            "and its C library need more to be loaded)");
  EXPECT_EQ(Refused(absl::StrCat(kWorker, "    resources: {memory: 4Mi}\n")), "");
}

TEST(JobSpecTest, ARoleGivenTwiceInAProtobufSpecIsRefused) {
  v1::JobSpec spec = ManyRoles(2, 1);
  spec.mutable_replicas(1)->set_role("r0");
  EXPECT_THAT(ValidateJobSpec(spec, {}), ::testing::Contains("replicas.r0: the role is given twice"));
}

TEST(JobSpecTest, ProblemsOfParsingStillCoverValidationsOfTheSameField) {
  std::vector<std::string> merged = MergeProblems(
      {"replicas.x.command: must be a list", "replicas.y.args[2]: must be a string"},
      {"replicas.x.command: required", "replicas.x.command[0]: contains a NUL byte", "replicas.y.args: too long",
       "replicas.xx.command: required"});
  EXPECT_THAT(merged, ::testing::ElementsAre("replicas.x.command: must be a list", "replicas.y.args[2]: must be a string",
                                             "replicas.xx.command: required"));
}

TEST(JobSpecTest, ActiveDeadlineIsADurationLikeTwoHoursOrNinetySeconds) {
  for (auto [text, ms] : {std::pair{"2h", 7'200'000}, std::pair{"30m", 1'800'000}, std::pair{"90s", 90'000},
                          std::pair{"1h30m", 5'400'000}, std::pair{"1500ms", 1'500}}) {
    auto spec = LoadJobSpec(absl::StrCat(kRole, "activeDeadline: ", text, "\n"), {});
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    EXPECT_EQ(spec->active_deadline_ms(), ms) << text;
  }
  auto none = LoadJobSpec(kRole, {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->active_deadline_ms(), 0) << "no limit asked: the queue's default applies";
  EXPECT_EQ(JobSpecRefusal(absl::StrCat(kRole, "activeDeadline: soon\n")),
            "activeDeadline: 'soon' is not a duration like 2h, 30m, 90s or 1h30m");
  EXPECT_EQ(JobSpecRefusal(absl::StrCat(kRole, "activeDeadline: 90\n")),
            "activeDeadline: '90' is not a duration like 2h, 30m, 90s or 1h30m")
      << "a bare number has no unit to read it in";
  EXPECT_EQ(JobSpecRefusal(absl::StrCat(kRole, "activeDeadline: -5m\n")), "activeDeadline: '-5m' is not a positive duration");
  EXPECT_EQ(JobSpecRefusal(absl::StrCat(kRole, "activeDeadline: 0s\n")), "activeDeadline: '0s' is not a positive duration");
  EXPECT_EQ(JobSpecRefusal(absl::StrCat(kRole, "activeDeadline: [2h]\n")), "activeDeadline: must be a string");
}

TEST(JobSpecTest, JobmasterIsUnsetTrueOrFalse) {
  auto unset = LoadJobSpec(kRole, {});
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_FALSE(unset->has_jobmaster()) << "the framework decides";
  auto torch = LoadJobSpec(absl::StrCat(kRole, "framework: pytorch\njobmaster: true\n"), {});
  ASSERT_TRUE(torch.ok()) << torch.status();
  EXPECT_TRUE(torch->has_jobmaster() && torch->jobmaster());
  auto none = LoadJobSpec(absl::StrCat(kRole, "jobmaster: false\n"), {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->has_jobmaster() && !none->jobmaster());
  EXPECT_EQ(JobSpecRefusal(absl::StrCat(kRole, "jobmaster: maybe\n")), "jobmaster: must be true or false");
  EXPECT_THAT(JobSpecRefusal("name: j\nframework: mpi\njobmaster: true\nreplicas:\n  launcher: {command: [x]}\n"
                      "  worker: {command: [x]}\n"),
              ::testing::HasSubstr("jobmaster: true is not for framework mpi"));
}

TEST(JobSpecTest, JobmasterFalseWithAMasterInTheClientIsRefused) {
  auto spec = LoadJobSpec(absl::StrCat(kRole, "jobmaster: false\n"), {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->set_job_master_address("10.0.0.9:4000");  // submit --jobmaster-in-client
  EXPECT_THAT(ValidateJobSpec(*spec, {}),
              ::testing::ElementsAre(::testing::HasSubstr("jobmaster: false asks for no job master")));
}

}  // namespace
}  // namespace trainyard::api
