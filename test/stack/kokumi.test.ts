import {readFileSync} from 'node:fs'
import {describe, expect, it} from 'vitest'
import {ValidationError} from '../../src/lib/errors/errors.js'
import {bcryptVerify} from '../../src/lib/stack/bcrypt.js'
import {
  KOKUMI_OBJECTS,
  kokumiManifestVersion,
  registryStorage,
  renderKokumi,
  serverAuthSecret,
  serviceToClusterIP,
  setMemoryLimit,
  setReplicas,
  validateKokumiValues,
} from '../../src/lib/stack/kokumi.js'
import {findObject, parseObjects} from '../../src/lib/stack/objects.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {UPSTREAM} from '../support/upstream.js'

const manifestText = readFileSync(UPSTREAM.kokumiManifest, 'utf8')
const parsed = parseObjects(manifestText)
const upstream = (): KubeObject[] => structuredClone(parsed)
const generated = {adminPassword: 'Zq3-generated-password-9x', signingKey: 'c2lnbmluZy1rZXktZ2VuZXJhdGVkLWZvci10ZXN0cw=='}

type Spec = Record<string, any>
const spec = (objects: KubeObject[], kind: string, name: string): Spec => findObject(objects, kind, name)!.spec as Spec
const container = (objects: KubeObject[], name: string): Spec => spec(objects, 'Deployment', name).template.spec.containers[0]
const without = (objects: KubeObject[], kind: string, name: string) => objects.filter((o) => !(o.kind === kind && o.metadata.name === name))

describe('Kokumi transformations on the real 0.14.0 install.yaml', () => {
  it('reads the manifest version from the controller image', () => {
    expect(kokumiManifestVersion(upstream())).toBe('0.14.0')
  })

  it('turns the registry NodePort 30050 into a ClusterIP Service without nodePort', () => {
    const before = spec(upstream(), 'Service', 'kokumi-registry')
    expect(before.type).toBe('NodePort')
    expect(before.ports[0].nodePort).toBe(30050)
    const after = spec(serviceToClusterIP(upstream(), 'kokumi-registry'), 'Service', 'kokumi-registry')
    expect(after.type).toBe('ClusterIP')
    expect(after.ports).toEqual([{name: 'http', port: 5000, protocol: 'TCP', targetPort: 5000}])
  })

  it('fails naming the Service when the manifest has none', () => {
    expect(() => serviceToClusterIP(without(upstream(), 'Service', 'kokumi-registry'), 'kokumi-registry')).toThrow(
      'no Service kokumi-registry in the Kokumi manifest',
    )
  })

  it('without a default StorageClass: emptyDir with the size limit, PVC removed', () => {
    const out = registryStorage(upstream(), {defaultStorageClass: false, sizeLimit: '2Gi'})
    expect(findObject(out, 'PersistentVolumeClaim', 'kokumi-registry-pvc')).toBeUndefined()
    const volumes = spec(out, 'Deployment', 'kokumi-registry').template.spec.volumes
    expect(volumes.find((v: Spec) => v.name === 'storage')).toEqual({name: 'storage', emptyDir: {sizeLimit: '2Gi'}})
    expect(JSON.stringify(out)).not.toContain('persistentVolumeClaim')
  })

  it('with a default StorageClass: the PVC and its volume stay as shipped', () => {
    const out = registryStorage(upstream(), {defaultStorageClass: true, sizeLimit: '2Gi'})
    expect(out).toEqual(upstream())
  })

  it('fails naming the PVC or the Deployment that is missing', () => {
    expect(() => registryStorage(without(upstream(), 'PersistentVolumeClaim', 'kokumi-registry-pvc'), {defaultStorageClass: false, sizeLimit: '1Gi'})).toThrow(
      'no PersistentVolumeClaim kokumi-registry-pvc in the Kokumi manifest',
    )
    expect(() => registryStorage(without(upstream(), 'Deployment', 'kokumi-registry'), {defaultStorageClass: false, sizeLimit: '1Gi'})).toThrow(
      'no Deployment kokumi-registry in the Kokumi manifest',
    )
  })

  it('raises the controller-manager and server memory limits, keeping the CPU limit', () => {
    expect(container(upstream(), KOKUMI_OBJECTS.controllerDeployment).resources.limits).toEqual({cpu: '500m', memory: '128Mi'})
    let out = setMemoryLimit(upstream(), KOKUMI_OBJECTS.controllerDeployment, '256Mi')
    out = setMemoryLimit(out, KOKUMI_OBJECTS.serverDeployment, '256Mi')
    expect(container(out, 'kokumi-controller-manager').resources.limits).toEqual({cpu: '500m', memory: '256Mi'})
    expect(container(out, 'kokumi-server').resources.limits).toEqual({cpu: '500m', memory: '256Mi'})
    // The registry ships no resources at all; a limit is added only when asked for.
    expect(container(setMemoryLimit(upstream(), 'kokumi-registry', '512Mi'), 'kokumi-registry').resources).toEqual({limits: {memory: '512Mi'}})
  })

  it('sets replicas', () => {
    expect(spec(setReplicas(upstream(), 'kokumi-server', 2), 'Deployment', 'kokumi-server').replicas).toBe(2)
  })

  it('puts a bcrypt hash of the generated password and the signing key into kokumi-server-auth, keeping its keys', () => {
    const secret = findObject(serverAuthSecret(upstream(), generated, 4), 'Secret', 'kokumi-server-auth')!
    const data = secret.stringData as Record<string, string>
    expect(Object.keys(data).sort()).toEqual(['password-hash', 'signing-key', 'username'])
    expect(data.username).toBe('admin')
    expect(data['signing-key']).toBe(generated.signingKey)
    expect(bcryptVerify(generated.adminPassword, data['password-hash']!)).toBe(true)
    expect(bcryptVerify('admin', data['password-hash']!)).toBe(false)
    expect(JSON.stringify(secret)).not.toContain(generated.adminPassword)
  })

  it('refuses "admin", a short password or the shipped CHANGEME key', () => {
    expect(() => serverAuthSecret(upstream(), {...generated, adminPassword: 'admin'})).toThrow(ValidationError)
    expect(() => serverAuthSecret(upstream(), {...generated, signingKey: 'CHANGEME-replace-with-openssl-rand-base64-32'})).toThrow(/signingKey/)
  })

  it('fails naming a key the Secret lacks', () => {
    const objects = upstream()
    delete (findObject(objects, 'Secret', 'kokumi-server-auth')!.stringData as Record<string, string>)['signing-key']
    expect(() => serverAuthSecret(objects, generated, 4)).toThrow('Secret kokumi-server-auth in the Kokumi manifest has no key signing-key')
  })
})

describe('Kokumi user values', () => {
  it('accepts the mapped keys', () => {
    const values = {
      controller: {replicas: 1, resources: {limits: {memory: '384Mi'}}},
      server: {replicas: 2, resources: {limits: {memory: '300Mi'}}},
      registry: {resources: {limits: {memory: '1Gi'}}, storage: {sizeLimit: '5Gi'}},
    }
    expect(validateKokumiValues(values)).toEqual(values)
  })

  it('refuses anything else, naming the path and listing what is accepted', () => {
    try {
      validateKokumiValues({controller: {image: 'x', resources: {limits: {memory: 5}}}, server: {replicas: -1}, extra: true})
      expect.fail('should throw')
    } catch (error) {
      expect(error).toBeInstanceOf(ValidationError)
      const issues = (error as ValidationError).issues
      expect(issues.map((i) => i.path).sort()).toEqual(['controller.image', 'controller.resources.limits.memory', 'extra', 'server.replicas'])
      expect(issues.find((i) => i.path === 'extra')!.message).toContain('controller.resources.limits.memory')
      expect(issues.find((i) => i.path === 'extra')!.message).toContain('registry.storage.sizeLimit')
    }
  })
})

describe('renderKokumi', () => {
  const input = {manifestText, defaultStorageClass: false, generated, bcryptCost: 4}

  it('applies every transformation and the user values', () => {
    const {version, objects} = renderKokumi({
      ...input,
      userValues: {server: {replicas: 2, resources: {limits: {memory: '512Mi'}}}, registry: {storage: {sizeLimit: '3Gi'}}},
    })
    expect(version).toBe('0.14.0')
    expect(spec(objects, 'Service', 'kokumi-registry').type).toBe('ClusterIP')
    expect(spec(objects, 'Service', 'kokumi-server').type).toBe('ClusterIP')
    expect(JSON.stringify(objects)).not.toMatch(/nodePort/)
    expect(findObject(objects, 'PersistentVolumeClaim', 'kokumi-registry-pvc')).toBeUndefined()
    expect(spec(objects, 'Deployment', 'kokumi-registry').template.spec.volumes[1]).toEqual({name: 'storage', emptyDir: {sizeLimit: '3Gi'}})
    expect(container(objects, 'kokumi-controller-manager').resources.limits.memory).toBe('256Mi')
    expect(container(objects, 'kokumi-server').resources.limits.memory).toBe('512Mi')
    expect(spec(objects, 'Deployment', 'kokumi-server').replicas).toBe(2)
  })

  it('refuses unknown user values before anything is rendered', () => {
    expect(() => renderKokumi({...input, userValues: {registry: {service: {type: 'NodePort'}}}})).toThrow(/registry.service: Kokumi values accept only/)
  })
})
