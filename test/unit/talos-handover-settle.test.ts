// The settle period after the inventory edit of the Cilium hand-over: 5 s unless the
// environment names another length (the test harness shortens it: its simulated manifest runs
// are short, TALOS_SIM_MANIFEST_RUN_MS).
import {describe, expect, it} from 'vitest'
import {INVENTORY_SETTLE_ENV, inventorySettleMs} from '../../src/lib/talos/handover.js'

describe('inventorySettleMs', () => {
  it('is 5 s by default and for anything but whole milliseconds; the environment sets another length', () => {
    expect(inventorySettleMs({})).toBe(5000)
    expect(inventorySettleMs({[INVENTORY_SETTLE_ENV]: '100'})).toBe(100)
    expect(inventorySettleMs({[INVENTORY_SETTLE_ENV]: '0'})).toBe(0)
    for (const bad of ['', ' ', '-1', '1.5', '5s', 'fast']) expect(inventorySettleMs({[INVENTORY_SETTLE_ENV]: bad}), bad).toBe(5000)
  })
})
