/* Descriptor layout, lazy compute pipelines with specialization constants,
 * and the on-disk VkPipelineCache (host->cache_dir, keyed by the driver's
 * pipelineCacheUUID, vendor/device id and the library version). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vk_internal.h"

static void cache_path(qp_vk_device *d, char *out, size_t cap) {
    char uuid[2 * VK_UUID_SIZE + 1];
    for (unsigned i = 0; i < VK_UUID_SIZE; i++) snprintf(uuid + 2 * i, 3, "%02x", d->props.pipelineCacheUUID[i]);
    snprintf(out, cap, "%s/vk-pipelines-%s-%04x-%04x-%s.bin", d->be->host->cache_dir, uuid, d->props.vendorID,
             d->props.deviceID, d->be->host->version ? d->be->host->version : "0");
}

static void *read_cache(qp_vk_device *d, size_t *len) {
    *len = 0;
    if (!d->be->host->cache_dir || !*d->be->host->cache_dir) return NULL;
    char path[1024];
    cache_path(d, path, sizeof path);
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    void *buf = NULL;
    if (fseek(fp, 0, SEEK_END) == 0) {
        long n = ftell(fp);
        if (n > 0 && n < (64l << 20) && fseek(fp, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n))) {
            if (fread(buf, 1, (size_t)n, fp) == (size_t)n) *len = (size_t)n;
            else { free(buf); buf = NULL; }
        }
    }
    fclose(fp);
    return buf;
}

/* Written to a temporary name and renamed, so concurrent processes never
 * read a half-written cache (the driver validates the header anyway). */
static void write_cache(qp_vk_device *d) {
    if (!d->cache || !d->be->host->cache_dir || !*d->be->host->cache_dir || !d->n_pipes) return;
    size_t n = 0;
    if (d->fn->vkGetPipelineCacheData(d->dev, d->cache, &n, NULL) != VK_SUCCESS || !n) return;
    void *buf = malloc(n);
    if (!buf) return;
    char path[1024], tmp[1100];
    if (d->fn->vkGetPipelineCacheData(d->dev, d->cache, &n, buf) == VK_SUCCESS) {
        cache_path(d, path, sizeof path);
        snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
        FILE *fp = fopen(tmp, "wb");
        if (fp) {
            bool ok = fwrite(buf, 1, n, fp) == n;
            ok = fclose(fp) == 0 && ok;
            if (!ok || rename(tmp, path) != 0) {
                remove(tmp);
                QP_VK_LOG(d->be, QP_LOG_DEBUG, "vulkan:%d: could not write the pipeline cache %s", d->index, path);
            }
        }
    }
    free(buf);
}

qp_status qp_vk_pipelines_init(qp_vk_device *d) {
    qp_vk_fns *f = d->fn;
    VkDescriptorSetLayoutBinding b[QP_VK_BINDINGS];
    for (uint32_t i = 0; i < QP_VK_BINDINGS; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = i, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    /* push descriptors: each dispatch's bindings live in the command buffer,
     * so no descriptor set is ever rewritten under work in flight */
    VkDescriptorSetLayoutCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
                                           .bindingCount = QP_VK_BINDINGS, .pBindings = b};
    VkResult r = f->vkCreateDescriptorSetLayout(d->dev, &dci, NULL, &d->dsl);
    if (r != VK_SUCCESS) {
        d->dsl = VK_NULL_HANDLE;
        return qp_vk_error(d, QP_ERR_DEVICE, NULL, "vkCreateDescriptorSetLayout failed: %s", qp_vk_result_str(r));
    }
    VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = sizeof(qp_vk_push)};
    VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1,
                                      .pSetLayouts = &d->dsl, .pushConstantRangeCount = 1, .pPushConstantRanges = &pcr};
    r = f->vkCreatePipelineLayout(d->dev, &lci, NULL, &d->layout);
    if (r != VK_SUCCESS) {
        d->layout = VK_NULL_HANDLE;
        return qp_vk_error(d, QP_ERR_DEVICE, NULL, "vkCreatePipelineLayout failed: %s", qp_vk_result_str(r));
    }
    size_t len;
    void *data = read_cache(d, &len);
    VkPipelineCacheCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, .initialDataSize = len,
                                     .pInitialData = data};
    r = f->vkCreatePipelineCache(d->dev, &pci, NULL, &d->cache);
    if (r != VK_SUCCESS && data) { /* a stale or foreign file: start empty */
        pci.initialDataSize = 0;
        pci.pInitialData = NULL;
        r = f->vkCreatePipelineCache(d->dev, &pci, NULL, &d->cache);
    }
    free(data);
    if (r != VK_SUCCESS) d->cache = VK_NULL_HANDLE; /* works without a cache */
    return QP_OK;
}

void qp_vk_pipelines_destroy(qp_vk_device *d) {
    qp_vk_fns *f = d->fn;
    write_cache(d);
    for (size_t i = 0; i < d->n_pipes; i++) f->vkDestroyPipeline(d->dev, d->pipes[i].pipeline, NULL);
    free(d->pipes);
    d->pipes = NULL;
    d->n_pipes = d->cap_pipes = 0;
    for (int i = 0; i < QP_VK_SH_COUNT; i++)
        if (d->modules[i]) f->vkDestroyShaderModule(d->dev, d->modules[i], NULL);
    memset(d->modules, 0, sizeof d->modules);
    if (d->cache) f->vkDestroyPipelineCache(d->dev, d->cache, NULL);
    if (d->layout) f->vkDestroyPipelineLayout(d->dev, d->layout, NULL);
    if (d->dsl) f->vkDestroyDescriptorSetLayout(d->dev, d->dsl, NULL);
    d->cache = VK_NULL_HANDLE;
    d->layout = VK_NULL_HANDLE;
    d->dsl = VK_NULL_HANDLE;
}

qp_status qp_vk_pipeline_get(qp_vk_device *d, qp_vk_shader sh, const uint32_t spec[QP_VK_SPEC_COUNT], VkPipeline *out) {
    qp_vk_fns *f = d->fn;
    for (size_t i = 0; i < d->n_pipes; i++)
        if (d->pipes[i].shader == sh && !memcmp(d->pipes[i].spec, spec, sizeof d->pipes[i].spec)) {
            *out = d->pipes[i].pipeline;
            return QP_OK;
        }
    const qp_vk_spirv *code = qp_vk_spirv_get(sh);
    if (!code || !code->code)
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "shader %s was not built", code ? code->name : "?");
    VkResult r;
    if (!d->modules[sh]) {
        VkShaderModuleCreateInfo mci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = code->bytes,
                                        .pCode = code->code};
        r = f->vkCreateShaderModule(d->dev, &mci, NULL, &d->modules[sh]);
        if (r != VK_SUCCESS) {
            d->modules[sh] = VK_NULL_HANDLE;
            return qp_vk_error(d, QP_ERR_DEVICE, NULL, "vkCreateShaderModule(%s) failed: %s", code->name,
                             qp_vk_result_str(r));
        }
    }
    qp_vk_pipe *pipes = qp_vk_grow(d->pipes, d->n_pipes, &d->cap_pipes, sizeof *pipes, 16);
    if (!pipes) return qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "out of memory for pipelines");
    d->pipes = pipes;
    VkSpecializationMapEntry ent[QP_VK_SPEC_COUNT];
    for (uint32_t i = 0; i < QP_VK_SPEC_COUNT; i++)
        ent[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    VkSpecializationInfo si = {.mapEntryCount = QP_VK_SPEC_COUNT, .pMapEntries = ent,
                               .dataSize = 4 * QP_VK_SPEC_COUNT, .pData = spec};
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = d->modules[sh], .pName = "main", .pSpecializationInfo = &si},
        .layout = d->layout,
    };
    VkPipeline p;
    r = f->vkCreateComputePipelines(d->dev, d->cache, 1, &ci, NULL, &p);
    if (r != VK_SUCCESS)
        return qp_vk_error(d, QP_ERR_DEVICE, NULL, "vkCreateComputePipelines(%s) failed: %s", code->name,
                         qp_vk_result_str(r));
    d->pipes[d->n_pipes].shader = sh;
    memcpy(d->pipes[d->n_pipes].spec, spec, sizeof d->pipes[d->n_pipes].spec);
    d->pipes[d->n_pipes].pipeline = p;
    d->n_pipes++;
    *out = p;
    return QP_OK;
}
