//! `hetsched.report_capability_fallback`: a Python program that takes a
//! slower path because the core it runs on lacks an instruction set
//! extension tells the thread balancer, which then keeps the thread off
//! such cores (Kinship's functional asymmetry).

use hetsched_runtime::Category;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Counts one fallback of the calling thread on the CPU it runs on, for
/// work of `category`: "vector", "crypto" or "float64".
#[pyfunction]
pub fn report_capability_fallback(category: &str) -> PyResult<()> {
    let c = Category::parse(category)
        .filter(|c| *c != Category::GENERAL)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "unknown fallback category {category:?}: use \"vector\", \"crypto\" or \"float64\""
            ))
        })?;
    hetsched_runtime::report_capability_fallback(c);
    Ok(())
}
