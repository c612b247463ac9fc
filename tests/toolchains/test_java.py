"""The Java client as its users meet it.

- Its own tests: `mvn test` in clients/java (JUnit against in-process gRPC servers, the policy
  test that reads clients/conformance/policy.json, the conformance runner's path lookups).
- Its packaging: `mvn install` of clients/java/memoryd-client puts the artifact, its sources
  and javadoc jars in the local Maven repository; the runtime jar carries the licence and no
  test or conformance class; a fresh consumer project that depends on
  dev.memoryd:memoryd-client:0.1.0 by coordinates compiles a hello program, which writes and
  recalls a memory on a real memoryd server.

Fails — never skips — when Maven or a JDK is missing or a build fails. Maven runs offline once
the local repository (~/.m2) has every dependency and plugin, and goes online only when it does
not (the first run on a fresh machine downloads them, a minute or two). The artifact is
installed into ~/.m2 as a user's `mvn install` would: that is where a consumer resolves it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import grpc

from ..support import ROOT, ServerProcess, full_view, put_view, token_for, unique

JAVA = ROOT / "clients" / "java"
LIBRARY = JAVA / "memoryd-client"
COORDINATES = ("dev.memoryd", "memoryd-client", "0.1.0")
POM = {"m": "http://maven.apache.org/POM/4.0.0"}
# The JVM flags the Java build runs Maven with (the quick compiler alone, the serial collector):
# the consumer project below and its run get them too. They change speed, never output.
QUICK_JVM = (JAVA / ".mvn" / "jvm.config").read_text().split()


def _mvn(*args: str, cwd: Path, timeout: int = 400) -> subprocess.CompletedProcess[str]:
    """Run Maven offline; online only when the local repository lacks something."""
    assert shutil.which("mvn"), "Maven (mvn) is not installed: the Java client needs it"
    assert shutil.which("java"), "no JDK (java) is installed: the Java client needs Java 17"
    # Inside clients/java, Maven reads .mvn/jvm.config itself.
    env = None if cwd.is_relative_to(JAVA) else {**os.environ, "MAVEN_OPTS": " ".join(QUICK_JVM)}
    run = subprocess.run(["mvn", "-B", "-q", "-o", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                         env=env)
    if run.returncode != 0 and "offline mode" in run.stdout + run.stderr:
        run = subprocess.run(["mvn", "-B", "-q", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                             env=env)
    assert run.returncode == 0, f"mvn {' '.join(args)} failed in {cwd}:\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    return run


def test_the_java_client_builds_and_its_junit_tests_pass():
    reports = [JAVA / module / "target" / "surefire-reports" for module in ("memoryd-client", "conformance")]
    for folder in reports:
        if folder.exists():
            shutil.rmtree(folder)
    _mvn("test", cwd=JAVA)
    summaries = {folder.parent.parent.name: [p.read_text() for p in folder.glob("*.txt")] for folder in reports}
    for module, texts in summaries.items():
        counts = [tuple(map(int, m)) for s in texts
                  for m in re.findall(r"Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)", s)]
        assert counts, f"mvn test ran no test class in {module}"
        assert all(c[1:] == (0, 0, 0) for c in counts), texts
    ran = sum(int(n) for texts in summaries.values() for s in texts for n in re.findall(r"Tests run: (\d+),", s))
    assert ran >= 30, summaries


HELLO = """\
import dev.memoryd.client.MemorydClient;
import dev.memoryd.client.MemorydException;
import dev.memoryd.v1.Category;
import dev.memoryd.v1.Memory;
import dev.memoryd.v1.MemoryDraft;
import dev.memoryd.v1.MemoryViewRequest;
import dev.memoryd.v1.RecallRequest;
import dev.memoryd.v1.RecallResponse;
import dev.memoryd.v1.Turn;
import dev.memoryd.v1.WriteRequest;
import com.google.protobuf.Timestamp;
import java.time.Instant;

public final class Hello {
  public static void main(String[] args) {
    String target = args[0], token = args[1], subject = args[2];
    try (MemorydClient client = MemorydClient.newBuilder(target).tokenProvider(() -> token).build()) {
      client.write(WriteRequest.newBuilder().setSubject(subject).addItems(MemoryDraft.newBuilder()
          .setCategory(Category.CATEGORY_FACT).setKey("home_city").setText("Lyon")).build());
      // The key, and whatever the conversation so far (most recent turn last) is about.
      Timestamp now = Timestamp.newBuilder().setSeconds(Instant.now().getEpochSecond()).build();
      RecallResponse found = client.recall(RecallRequest.newBuilder().setSubject(subject).addKeys("home_city")
          .addContext(Turn.newBuilder().setTurnId("t1").setSpeaker("user").setText("To my home city, of course!")
              .setTime(now)).build());
      System.out.println("recalled " + found.getMemories(0).getMemory().getText());
      long listed = client.memoryViewAll(MemoryViewRequest.newBuilder().setSubject(subject).build()).stream().count();
      System.out.println("listed " + listed);
      try {
        client.recall(RecallRequest.newBuilder().setSubject("").build());
      } catch (MemorydException e) {
        System.out.println("refused " + e.getCode() + " " + e.getReason());
      }
    }
  }
}
"""

CONSUMER_POM = """\
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>hello-memoryd</artifactId>
  <version>1.0</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>{0}</groupId>
      <artifactId>{1}</artifactId>
      <version>{2}</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-resources-plugin</artifactId>
        <version>3.3.1</version>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>3.13.0</version>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>3.8.1</version>
      </plugin>
    </plugins>
  </build>
</project>
"""


def _installed() -> Path:
    repo = Path.home() / ".m2" / "repository"
    group, artifact, version = COORDINATES
    return repo.joinpath(*group.split("."), artifact, version)


def _check_artifact(folder: Path) -> None:
    _, artifact, version = COORDINATES
    base = f"{artifact}-{version}"
    jars = {kind: folder / f"{base}{kind}.jar" for kind in ("", "-sources", "-javadoc")}
    assert {k: p.is_file() for k, p in jars.items()} == dict.fromkeys(jars, True), sorted(folder.iterdir())

    with zipfile.ZipFile(jars[""]) as runtime:
        names = runtime.namelist()
        assert runtime.read("META-INF/LICENSE") == (ROOT / "LICENSE").read_bytes()
    classes = [n for n in names if n.endswith(".class")]
    assert "dev/memoryd/client/MemorydClient.class" in classes
    assert "dev/memoryd/v1/MemoryServiceGrpc.class" in classes
    outside = [n for n in classes if not n.startswith(("dev/memoryd/client/", "dev/memoryd/v1/"))]
    assert outside == [], f"classes of other packages (bundled dependencies?): {outside[:10]}"
    test_code = [n for n in classes if "conformance" in n.lower() or re.search(r"Tests?(\$|\.class)", n)]
    assert test_code == [], test_code

    with zipfile.ZipFile(jars["-sources"]) as sources:
        assert "dev/memoryd/client/MemorydClient.java" in sources.namelist()
        assert "dev/memoryd/v1/WriteRequest.java" in sources.namelist()
    with zipfile.ZipFile(jars["-javadoc"]) as javadoc:
        assert "dev/memoryd/client/MemorydClient.html" in javadoc.namelist()

    pom = ET.parse(folder / f"{base}.pom").getroot()
    assert [e.text for e in pom.findall("m:licenses/m:license/m:name", POM)] == ["Apache-2.0"]
    for path in ("m:url", "m:scm/m:connection", "m:scm/m:url", "m:developers/m:developer/m:name", "m:description"):
        assert (pom.findtext(path, namespaces=POM) or "").strip(), f"the pom has no {path}"
    assert pom.find("m:parent", POM) is None, "the pom must resolve without a parent"
    deps = {d.findtext("m:artifactId", namespaces=POM): (d.findtext("m:scope", namespaces=POM) or "compile",
                                                         d.findtext("m:optional", namespaces=POM) == "true")
            for d in pom.findall("m:dependencies/m:dependency", POM)}
    for needed in ("grpc-api", "grpc-protobuf", "grpc-stub", "protobuf-java"):
        assert deps.get(needed) == ("compile", False), (needed, deps)
    assert deps.get("grpc-netty-shaded") == ("runtime", False), deps
    assert deps.get("opentelemetry-api") == ("compile", True), deps


def test_a_consumer_project_resolves_the_installed_artifact_and_talks_to_memoryd(
        server: ServerProcess, channel: grpc.Channel, key_file: Path, tmp_path: Path):
    _mvn("install", "-DskipTests", cwd=LIBRARY)
    _check_artifact(_installed())

    consumer = tmp_path / "hello-memoryd"
    (consumer / "src" / "main" / "java").mkdir(parents=True)
    (consumer / "pom.xml").write_text(CONSUMER_POM.format(*COORDINATES))
    (consumer / "src" / "main" / "java" / "Hello.java").write_text(HELLO)
    _mvn("compile", "dependency:build-classpath", "-Dmdep.outputFile=classpath.txt",
         "-Dmdep.includeScope=runtime", cwd=consumer)
    classpath = (consumer / "classpath.txt").read_text().strip()
    jars = [Path(p).name for p in classpath.split(":")]
    assert "memoryd-client-0.1.0.jar" in jars and any(j.startswith("grpc-netty-shaded-") for j in jars), jars
    # The OpenTelemetry API is optional: a consumer that does not trace gets none, and the
    # client runs without it.
    assert not any(j.startswith("opentelemetry") for j in jars), jars
    assert not any(j.startswith(("junit", "grpc-inprocess", "memoryd-conformance")) for j in jars), jars

    tenant, agent, subject = unique("tenant"), "hello-agent", unique("subject")
    put_view(channel, key_file, tenant, full_view(agent))
    token = token_for(key_file, tenant, agent)
    run = subprocess.run(["java", *QUICK_JVM, "-cp", f"{consumer / 'target' / 'classes'}:{classpath}", "Hello",
                          server.target, token, subject], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run.stdout.splitlines() == ["recalled Lyon", "listed 1", "refused INVALID_ARGUMENT INVALID_REQUEST"], \
        run.stdout + run.stderr[-2000:]


def test_the_java_watcher_resumes_against_a_real_server(fast_heartbeat_server: ServerProcess, key_file: Path):
    """The Java Watcher against the real server through a relay its test cuts: a dropped
    connection and then a silent one, each change committed meanwhile arriving once, in order
    (RealServerWatcherTest, which the build leaves out and this runs by name)."""
    tenant = unique("tenant")
    with grpc.insecure_channel(fast_heartbeat_server.target) as channel:
        put_view(channel, key_file, tenant, full_view("java-watcher"))
    report = LIBRARY / "target" / "surefire-reports" / "dev.memoryd.client.RealServerWatcherTest.txt"
    report.unlink(missing_ok=True)
    _mvn("test", "-Dtest=RealServerWatcherTest", f"-Dmemoryd.test.target={fast_heartbeat_server.target}",
         f"-Dmemoryd.test.token={token_for(key_file, tenant, 'java-watcher')}", "-Dmemoryd.test.heartbeat=PT1S",
         cwd=LIBRARY)
    assert "Tests run: 1, Failures: 0, Errors: 0, Skipped: 0" in report.read_text(), report.read_text()
