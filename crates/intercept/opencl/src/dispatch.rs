//! Positions in the ICD dispatch table (`struct _cl_icd_dispatch` of the
//! Khronos `CL/cl_icd.h`): every entry is one function pointer, in the
//! header's order, which is fixed by the ICD ABI (ocl-icd's own
//! `ocl_icd.h` lays it out the same). Only the entries the layer replaces
//! or calls are named; `tests/dispatch_offsets.rs` compiles the header
//! and checks each position with `offsetof`.

macro_rules! entries {
    ($($name:ident = $index:expr, $c:literal;)*) => {
        $(pub const $name: usize = $index;)*
        /// (index, C name) of every named entry.
        pub const NAMED: &[(usize, &str)] = &[$(($index, $c)),*];
    };
}

entries! {
    GET_PLATFORM_IDS = 0, "clGetPlatformIDs";
    GET_DEVICE_IDS = 2, "clGetDeviceIDs";
    GET_CONTEXT_INFO = 8, "clGetContextInfo";
    CREATE_COMMAND_QUEUE = 9, "clCreateCommandQueue";
    RETAIN_COMMAND_QUEUE = 10, "clRetainCommandQueue";
    RELEASE_COMMAND_QUEUE = 11, "clReleaseCommandQueue";
    GET_COMMAND_QUEUE_INFO = 12, "clGetCommandQueueInfo";
    CREATE_BUFFER = 14, "clCreateBuffer";
    CREATE_IMAGE_2D = 15, "clCreateImage2D";
    CREATE_IMAGE_3D = 16, "clCreateImage3D";
    RELEASE_MEM_OBJECT = 18, "clReleaseMemObject";
    GET_MEM_OBJECT_INFO = 20, "clGetMemObjectInfo";
    WAIT_FOR_EVENTS = 41, "clWaitForEvents";
    GET_EVENT_INFO = 42, "clGetEventInfo";
    FINISH = 47, "clFinish";
    ENQUEUE_READ_BUFFER = 48, "clEnqueueReadBuffer";
    ENQUEUE_WRITE_BUFFER = 49, "clEnqueueWriteBuffer";
    ENQUEUE_COPY_BUFFER = 50, "clEnqueueCopyBuffer";
    ENQUEUE_READ_IMAGE = 51, "clEnqueueReadImage";
    ENQUEUE_WRITE_IMAGE = 52, "clEnqueueWriteImage";
    ENQUEUE_COPY_IMAGE = 53, "clEnqueueCopyImage";
    ENQUEUE_COPY_IMAGE_TO_BUFFER = 54, "clEnqueueCopyImageToBuffer";
    ENQUEUE_COPY_BUFFER_TO_IMAGE = 55, "clEnqueueCopyBufferToImage";
    ENQUEUE_ND_RANGE_KERNEL = 59, "clEnqueueNDRangeKernel";
    ENQUEUE_TASK = 60, "clEnqueueTask";
    SET_MEM_OBJECT_DESTRUCTOR_CALLBACK = 83, "clSetMemObjectDestructorCallback";
    ENQUEUE_READ_BUFFER_RECT = 86, "clEnqueueReadBufferRect";
    ENQUEUE_WRITE_BUFFER_RECT = 87, "clEnqueueWriteBufferRect";
    ENQUEUE_COPY_BUFFER_RECT = 88, "clEnqueueCopyBufferRect";
    CREATE_IMAGE = 96, "clCreateImage";
    ENQUEUE_FILL_BUFFER = 102, "clEnqueueFillBuffer";
    ENQUEUE_FILL_IMAGE = 103, "clEnqueueFillImage";
    ENQUEUE_MIGRATE_MEM_OBJECTS = 104, "clEnqueueMigrateMemObjects";
    CREATE_COMMAND_QUEUE_WITH_PROPERTIES = 123, "clCreateCommandQueueWithProperties";
    SVM_ALLOC = 126, "clSVMAlloc";
    SVM_FREE = 127, "clSVMFree";
    ENQUEUE_SVM_MEMCPY = 129, "clEnqueueSVMMemcpy";
    ENQUEUE_SVM_MEM_FILL = 130, "clEnqueueSVMMemFill";
    CREATE_BUFFER_WITH_PROPERTIES = 146, "clCreateBufferWithProperties";
    CREATE_IMAGE_WITH_PROPERTIES = 147, "clCreateImageWithProperties";
}

/// Entries up to the last one named: a loader that offers fewer is too
/// old for the layer, which then declines to load.
pub const MIN_ENTRIES: usize = CREATE_IMAGE_WITH_PROPERTIES + 1;
