//! Accelerator selection: which unit a client is associated with, under
//! each unit's memory and client cap.

use super::*;

impl Monitor {
    /// Memory and client caps of selectable units, by unit name (units
    /// not named keep the defaults; names of other units are ignored).
    pub fn set_accelerator_limits(&mut self, by_name: &BTreeMap<String, AcceleratorLimits>) {
        for (a, limits) in self.agents.iter().zip(&mut self.accelerator_limits) {
            if let (Some(l), Some(given)) = (limits.as_mut(), by_name.get(&a.setup.unit.name)) {
                *l = *given;
            }
        }
    }

    /// Every selectable unit's profile now, leaving out `except`'s own
    /// association (a client that asks again is placed as if it had none).
    pub(super) fn accelerator_profiles(&self, except: Option<ClientId>) -> Vec<AcceleratorProfile> {
        self.agents
            .iter()
            .zip(&self.accelerator_limits)
            .enumerate()
            .filter_map(|(u, (a, limits))| {
                let l = limits.as_ref()?;
                let mut load = DynamicProfile::default();
                for (_, s) in self
                    .associations
                    .iter()
                    .filter(|(c, s)| Some(**c) != except && s.unit == u)
                {
                    load.allocated_bytes = load.allocated_bytes.saturating_add(s.memory_bytes);
                    load.clients += 1;
                }
                let unit = &a.setup.unit;
                Some(AcceleratorProfile {
                    unit: unit.id,
                    name: unit.name.clone(),
                    class: unit.class,
                    fixed: StaticProfile {
                        speed: unit.relative_speed,
                        streams: unit.slots,
                        memory_bytes: l.memory_bytes,
                        bandwidth_bytes_per_s: unit.copy_in.bytes_per_s(),
                        max_clients: l.max_clients,
                    },
                    load,
                })
            })
            .collect()
    }

    /// `SelectAccelerator`: associates `client` with the accelerator of
    /// highest weight that holds `memory_bytes` and is below its client
    /// cap. A refusal leaves an earlier association as it was.
    pub fn select_accelerator(
        &mut self,
        client: ClientId,
        memory_bytes: u64,
        class: Option<UnitClass>,
    ) -> Result<DaemonMsg, Refusal> {
        self.application(client)?;
        let profiles = self.accelerator_profiles(Some(client));
        let unit = selection::select(
            &profiles,
            &Need {
                memory_bytes,
                class,
            },
        )
        .map_err(|e| (ErrorCode::NoAcceleratorFits, e.to_string()))?;
        let weight = profiles
            .iter()
            .find(|p| p.unit == unit)
            .map_or(0.0, selection::weight);
        self.associations.insert(
            client,
            Association {
                unit: unit.index(),
                memory_bytes,
            },
        );
        Ok(DaemonMsg::AcceleratorSelected { unit, weight })
    }

    /// The unit `client` is associated with, if any.
    pub fn association(&self, client: ClientId) -> Option<UnitId> {
        self.associations
            .get(&client)
            .map(|s| self.agents[s.unit].id())
    }
}
