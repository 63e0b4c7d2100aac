// The Kubernetes manifests of deploy/kubernetes/, checked without a cluster (none runs here):
// - each object against the Kubernetes API's JSON schemas, vendored by the registry's kubernetes-models
//   (types, required fields, formats, enums), and for unknown fields (a misspelt `periodSecond`, which
//   the API server's strict validation refuses and the schemas let pass) by TypeScript's excess-property
//   check against the same package's types;
// - the settings they give the service (the ConfigMap and the *_FILE variables, with the Secret's keys
//   as files) through the service's own configuration loader: accepted as production settings;
// - what must agree between them, the image (Containerfile) and the service: probes on /ready and
//   /live, preStop equal to the drain, the grace period above preStop + drain + the service's 10 s,
//   the user, port and DATA_DIR of the image, no service links (a Service named `metrics` would set
//   METRICS_PORT=tcp://…, which the service refuses).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { Deployment } from 'kubernetes-models/apps/v1/Deployment'
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler'
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget'
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap'
import { Secret } from 'kubernetes-models/v1/Secret'
import { Service } from 'kubernetes-models/v1/Service'
import { parseAllDocuments, parse as parseYaml } from 'yaml'
import { ConfigError, loadConfig } from '../platform/config.js'

const root = path.resolve(import.meta.dirname, '../..')
const dir = path.join(root, 'deploy/kubernetes')

// biome-ignore lint/suspicious/noExplicitAny: manifests are untyped YAML until validated
type Manifest = Record<string, any>

/** Each kind's model (its schema's validator) and its TypeScript type, by `apiVersion/kind`. */
const MODELS: Record<string, { model: new (data: never) => { validate(): void }; type: string }> = {
  'v1/ConfigMap': { model: ConfigMap, type: 'IConfigMap from "kubernetes-models/v1/ConfigMap"' },
  'v1/Secret': { model: Secret, type: 'ISecret from "kubernetes-models/v1/Secret"' },
  'v1/Service': { model: Service, type: 'IService from "kubernetes-models/v1/Service"' },
  'apps/v1/Deployment': {
    model: Deployment,
    type: 'IDeployment from "kubernetes-models/apps/v1/Deployment"',
  },
  'autoscaling/v2/HorizontalPodAutoscaler': {
    model: HorizontalPodAutoscaler,
    type: 'IHorizontalPodAutoscaler from "kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler"',
  },
  'policy/v1/PodDisruptionBudget': {
    model: PodDisruptionBudget,
    type: 'IPodDisruptionBudget from "kubernetes-models/policy/v1/PodDisruptionBudget"',
  },
}

const kustomization = parseYaml(fs.readFileSync(path.join(dir, 'kustomization.yaml'), 'utf8')) as {
  resources: string[]
}
const manifests: { file: string; doc: Manifest }[] = kustomization.resources.flatMap((file) =>
  parseAllDocuments(fs.readFileSync(path.join(dir, file), 'utf8')).map((d) => ({
    file,
    doc: d.toJS() as Manifest,
  })),
)
const one = (kind: string): Manifest => {
  const found = manifests.filter((m) => m.doc.kind === kind)
  assert.equal(found.length, 1, `one ${kind}`)
  return found[0]!.doc
}
const deployment = one('Deployment')
const pod = deployment.spec.template.spec
const container = pod.containers[0]
const configMap = one('ConfigMap')
const secret = one('Secret')

test('every file of deploy/kubernetes/ is in the kustomization, and every object is of a known kind', () => {
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
  assert.deepEqual([...kustomization.resources].sort(), files.sort())
  for (const { file, doc } of manifests)
    assert.ok(
      MODELS[`${doc.apiVersion}/${doc.kind}`],
      `${file}: ${doc.apiVersion} ${doc.kind} has a schema here`,
    )
  assert.deepEqual(manifests.map((m) => m.doc.kind).sort(), [
    'ConfigMap',
    'Deployment',
    'HorizontalPodAutoscaler',
    'PodDisruptionBudget',
    'Secret',
    'Service',
  ])
})

test("each object passes the Kubernetes API's schema (and the schema refuses a wrong type)", () => {
  for (const { file, doc } of manifests) {
    const { model } = MODELS[`${doc.apiVersion}/${doc.kind}`]!
    assert.doesNotThrow(() => new model(doc as never).validate(), `${file}: ${doc.kind}`)
  }
  const broken = structuredClone(deployment)
  broken.spec.template.spec.containers[0].readinessProbe.periodSeconds = 'two'
  assert.throws(() => new Deployment(broken as never).validate(), /periodSeconds/)
})

test('no unknown field: TypeScript checks each object against the API types (a misspelt field fails)', () => {
  // Inside the checkout, so that `kubernetes-models` resolves from its node_modules (test-artifacts/ is ignored).
  fs.mkdirSync(path.join(root, 'test-artifacts'), { recursive: true })
  const work = fs.mkdtempSync(path.join(root, 'test-artifacts', 'kubernetes-'))
  try {
    const imports = Object.values(MODELS).map((m) => `import type { ${m.type.replace(' from ', ' } from ')}`)
    const objects = manifests.map(({ doc }, i) => {
      const type = MODELS[`${doc.apiVersion}/${doc.kind}`]!.type.split(' ')[0]
      return `export const m${i}: ${type} = ${JSON.stringify(doc, null, 2)}`
    })
    // The check must be able to fail: a probe with a misspelt field is an error TypeScript must report.
    const probe = `export const typo: IDeployment["spec"] = {
  selector: {},
  template: { spec: { containers: [{ name: "x",
    // @ts-expect-error periodSecond is not a field of a probe
    readinessProbe: { periodSecond: 2 } }] } },
}`
    fs.writeFileSync(path.join(work, 'manifests.ts'), [...imports, ...objects, probe, ''].join('\n'))
    fs.writeFileSync(
      path.join(work, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          skipLibCheck: true,
          types: [],
        },
        files: ['manifests.ts'],
      }),
    )
    const manifest = createRequire(`${root}/`).resolve('typescript/package.json')
    const tsc = path.join(path.dirname(manifest), 'bin', 'tsc')
    const run = spawnSync(process.execPath, [tsc, '-p', work], { encoding: 'utf8', cwd: root })
    assert.equal(run.status, 0, `${run.stdout}${run.stderr}`)
  } finally {
    fs.rmSync(work, { recursive: true, force: true })
  }
})

test('the service accepts the settings the pod gets (the ConfigMap, and every secret as a file)', () => {
  const files = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-k8s-secrets-'))
  try {
    const mount = container.volumeMounts.find((v: Manifest) => v.name === 'secrets')
    assert.equal(
      pod.volumes.find((v: Manifest) => v.name === 'secrets').secret.secretName,
      secret.metadata.name,
    )
    // Values of the right form in place of the example's placeholders.
    const values: Record<string, string> = {
      'jwt-secret': 'k8s-test-secret-that-is-at-least-32-bytes-long',
      'edge-signing-key': (
        spawnSync(process.execPath, [
          '-e',
          "process.stdout.write(require('crypto').generateKeyPairSync('ed25519').privateKey.export({format:'pem',type:'pkcs8'}))",
        ]).stdout as Buffer
      ).toString(),
      'database-url': 'postgres://wristband:pw@postgres.example.internal:5432/wristband',
      'redis-url': 'redis://:pw@redis.example.internal:6379',
      'smtp-url': 'smtp://wristband:pw@smtp.example.internal:587',
      'sms-webhook-authorization': 'Bearer token',
    }
    assert.deepEqual(Object.keys(secret.stringData).sort(), Object.keys(values).sort())
    for (const [key, value] of Object.entries(values)) fs.writeFileSync(path.join(files, key), `${value}\n`)
    const env: Record<string, string> = { ...configMap.data }
    for (const { name, value } of container.env as { name: string; value: string }[]) {
      assert.ok(value.startsWith(`${mount.mountPath}/`), `${name} points into the Secret's mount`)
      const key = path.basename(value)
      assert.ok(key in secret.stringData, `${name}: the Secret has ${key}`)
      env[name] = path.join(files, key)
    }
    const config = loadConfig(env)
    assert.equal(config.NODE_ENV, 'production')
    assert.equal(config.JWT_SECRET, values['jwt-secret'])
    assert.equal(config.databaseUrl, values['database-url'])
    // Service links: the service passes over those of its own Service, but a Service of the namespace
    // named `metrics` would set METRICS_PORT=tcp://…, a setting: the start is refused. The pod has none.
    assert.equal(pod.enableServiceLinks, false)
    assert.doesNotThrow(() =>
      loadConfig({ ...env, WRISTBAND_PORT: 'tcp://10.0.0.1:80', WRISTBAND_SERVICE_HOST: '10.0.0.1' }),
    )
    assert.throws(
      () => loadConfig({ ...env, METRICS_PORT: 'tcp://10.0.0.5:9464' }),
      (err) => err instanceof ConfigError && /METRICS_PORT/.test(err.message),
    )
  } finally {
    fs.rmSync(files, { recursive: true, force: true })
  }
})

test('probes, drain and grace period agree with the service; image, pod and Service agree', () => {
  assert.equal(container.readinessProbe.httpGet.path, '/ready')
  // Liveness (and start-up) on /live, which asks no dependency: a database outage takes the pods out of
  // the Service through /ready, it never has the kubelet restart them.
  assert.equal(container.livenessProbe.httpGet.path, '/live')
  assert.equal(container.startupProbe.httpGet.path, '/live')
  const drain = Number(configMap.data.SHUTDOWN_DRAIN_SECONDS)
  const preStop = container.lifecycle.preStop.exec.command as string[]
  assert.deepEqual(preStop.slice(0, 1), ['/bin/sleep'])
  assert.equal(Number(preStop[1]), drain, 'preStop sleeps as long as the drain')
  // After the drain the service gives itself 10 s more before it exits 1 (docs/operations.md).
  assert.ok(pod.terminationGracePeriodSeconds > Number(preStop[1]) + drain + 10)
  // The readiness probe notices a drain well within it.
  assert.ok(container.readinessProbe.periodSeconds * container.readinessProbe.failureThreshold <= drain)

  const containerfile = fs.readFileSync(path.join(root, 'Containerfile'), 'utf8')
  const user = /^USER (\d+):(\d+)$/m.exec(containerfile)
  assert.ok(user)
  assert.equal(pod.securityContext.runAsUser, Number(user[1]))
  assert.equal(pod.securityContext.runAsGroup, Number(user[2]))
  assert.equal(pod.securityContext.runAsNonRoot, true)
  assert.equal(container.securityContext.readOnlyRootFilesystem, true)
  const dataDir = /DATA_DIR=(\S+)/.exec(containerfile)?.[1]
  assert.ok(
    container.volumeMounts.some((v: Manifest) => v.mountPath === dataDir),
    `DATA_DIR ${dataDir} is a volume`,
  )
  const port = Number(/PORT=(\d+)/.exec(containerfile)?.[1])
  const ports = Object.fromEntries(container.ports.map((p: Manifest) => [p.name, p.containerPort]))
  assert.equal(ports.http, port)
  assert.equal(ports.metrics, Number(configMap.data.METRICS_PORT))
  const service = one('Service')
  assert.deepEqual(service.spec.selector, deployment.spec.selector.matchLabels)
  assert.equal(service.spec.ports[0].targetPort, 'http')
  assert.deepEqual(one('PodDisruptionBudget').spec.selector.matchLabels, deployment.spec.selector.matchLabels)
  const hpa = one('HorizontalPodAutoscaler')
  assert.equal(hpa.spec.scaleTargetRef.name, deployment.metadata.name)
  assert.ok(hpa.spec.minReplicas >= 2, 'two pods at least, so one can be evicted')
  assert.ok(container.resources.requests.cpu, 'a CPU request: the autoscaler measures against it')
})
