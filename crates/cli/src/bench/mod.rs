//! `hetsched bench`: benchmarks that need real processes, one file per
//! benchmark (or family of benchmarks); `common.rs` starts the daemons
//! they measure and sums up their samples. `docs/PERFORMANCE.md` says
//! which figure each one produces.

pub(crate) mod balance;
mod clients;
mod common;
mod connections;
#[cfg(feature = "devices")]
mod device;
mod gate;
#[cfg(feature = "cuda")]
mod gpu;
#[cfg(feature = "opencl")]
mod intercept;
#[cfg(feature = "opencl")]
mod kernel;
#[cfg(feature = "devices")]
mod placement;
mod process_shares;
#[cfg(feature = "devices")]
mod served;
mod settings;

use anyhow::Result;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Dispatch-gate round trip with many concurrent clients.
    Gate(gate::GateArgs),
    /// The thread balancer's policies on worker processes over an emulated
    /// big/little machine (root).
    Balance(balance::BalanceBenchArgs),
    /// The thread balancer's epoch step time on a synthetic 8-core map.
    BalanceOverhead(balance::OverheadArgs),
    /// A client changing its settings as fast as the daemon answers: state
    /// file writes per second and a probe's round trip, against quiet.
    SettingsChurn(settings::SettingsChurnArgs),
    /// What many clients cost: idle ones (daemon CPU, memory, a probe's
    /// round trip) or active ones (lost requests, grant waits, `status`).
    Clients(clients::ClientsArgs),
    /// Two processes at equal shares on one unit, one with several
    /// connections: each one's part of the unit.
    ProcessShares(process_shares::ProcessSharesArgs),
    /// One client process of `process-shares`.
    #[command(hide = true)]
    ShareClient(process_shares::ShareClientArgs),
    /// Opens connections until refused and holds them (tests of the
    /// connection limits).
    #[command(hide = true)]
    HoldConnections(connections::HoldConnectionsArgs),
    /// A kernel served by the daemon (kernel ring, `opencl_units`) against
    /// the same kernel called in this process, per call.
    #[cfg(feature = "opencl")]
    ServedKernel(kernel::ServedKernelArgs),
    /// Two client processes (CUSTOM 70 / 30 by default) running real
    /// OpenCL kernels through the runtime on a device the daemon
    /// arbitrates: each one's part of the device time.
    #[cfg(feature = "devices")]
    DeviceShares(device::DeviceSharesArgs),
    /// Two unmodified OpenCL programs under `hetsched run` (CUSTOM 70 /
    /// 30) through the OpenCL layer: each one's part of the device time
    /// from the daemon's accounting, and what the layer costs one program
    /// alone.
    #[cfg(feature = "opencl")]
    Intercept(intercept::InterceptArgs),
    /// What the dispatch gate costs per call of a real OpenCL kernel run
    /// through the runtime, one at a time and batched.
    #[cfg(feature = "devices")]
    DeviceGate(device::DeviceGateArgs),
    /// Whether placement leaves a real device another process keeps busy,
    /// and how fast: where each call of a CPU-or-device task ran.
    #[cfg(feature = "devices")]
    DevicePlacement(placement::DevicePlacementArgs),
    /// One client process of `device-shares`.
    #[cfg(feature = "devices")]
    #[command(hide = true)]
    DeviceClient(device::DeviceClientArgs),
    /// Launch, copy, task-model and serving costs of a CUDA device,
    /// measured on it (for scripts/gpu-check.sh).
    #[cfg(feature = "cuda")]
    #[command(hide = true)]
    CudaCosts(gpu::CudaCostsArgs),
}

pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Gate(args) => gate::gate(args),
        BenchCommand::Balance(args) => balance::balance(args),
        BenchCommand::BalanceOverhead(args) => balance::overhead(args),
        BenchCommand::SettingsChurn(args) => settings::settings_churn(args),
        BenchCommand::Clients(args) => clients::clients(args),
        BenchCommand::ProcessShares(args) => process_shares::process_shares(args),
        BenchCommand::ShareClient(args) => process_shares::share_client(args),
        BenchCommand::HoldConnections(args) => connections::hold_connections(args),
        #[cfg(feature = "opencl")]
        BenchCommand::ServedKernel(args) => kernel::served_kernel(args),
        #[cfg(feature = "devices")]
        BenchCommand::DeviceShares(args) => device::device_shares(args),
        #[cfg(feature = "opencl")]
        BenchCommand::Intercept(args) => intercept::intercept(args),
        #[cfg(feature = "devices")]
        BenchCommand::DeviceGate(args) => device::device_gate(args),
        #[cfg(feature = "devices")]
        BenchCommand::DevicePlacement(args) => placement::device_placement(args),
        #[cfg(feature = "devices")]
        BenchCommand::DeviceClient(args) => device::device_client(args),
        #[cfg(feature = "cuda")]
        BenchCommand::CudaCosts(args) => gpu::cuda_costs(args),
    }
}
