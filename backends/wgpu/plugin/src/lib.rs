//! The wgpu delegate as a plugin file: the backend's entry point exported under the C symbol
//! the host's loader looks up. The backend itself is the `baton-backend-wgpu` library.

baton_delegate_api::export_plugin_entry!(baton_backend_wgpu::baton_delegate_entry);
